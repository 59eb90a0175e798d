package k3j.io;

import java.nio.file.Path;
import k3j.testkit.SafetensorsWriter;

/** Safetensors files for the reader's tests: a header given as text (well-formed or not), through the test kit's writer. */
final class Files8 {
    private Files8() {}

    static Path write(Path file, String header, byte[] data) {
        return SafetensorsWriter.write(file, header, data);
    }

    static String entry(String dtype, String shape, long begin, long end) {
        return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + begin + "," + end + "]}";
    }

    static byte[] bytes(int... v) {
        byte[] b = new byte[v.length];
        for (int i = 0; i < v.length; i++) b[i] = (byte) v[i];
        return b;
    }
}
