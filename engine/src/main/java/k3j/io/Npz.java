package k3j.io;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An {@code .npz} read as {@code numpy.load} reads it, or refused: the zip by {@link ZipArchive} (central directory,
 * local headers checked against it), each {@code <key>.npy} entry by {@link Npy}. Another entry is kept as its bytes,
 * as numpy returns it, unless it starts with the NumPy magic (numpy would read it as an array) or its name is also
 * an array's key (numpy would serve one of the two for both).
 *
 * @param arrays the {@code .npy} entries by key (the name without ".npy"), in directory order
 * @param others the other entries by name
 */
public record Npz(Map<String, Npy> arrays, Map<String, byte[]> others) {
    /** Reads {@code b} (a whole .npz), at most {@code maxBytes} uncompressed; {@code source} names it in errors. */
    public static Npz read(byte[] b, String source, long maxBytes) {
        Map<String, byte[]> entries = ZipArchive.read(b, source, maxBytes);
        Map<String, Npy> arrays = new LinkedHashMap<>();
        Map<String, byte[]> others = new LinkedHashMap<>();
        for (var e : entries.entrySet()) {
            String name = e.getKey();
            if (name.endsWith(".npy")) {
                arrays.put(name.substring(0, name.length() - 4), Npy.parse(e.getValue(), source + ":" + name));
            } else if (Npy.hasMagic(e.getValue())) {
                throw new Npy.NpyException(source + ":" + name + ": an entry not named .npy holds an array (numpy would read it as one)");
            } else {
                others.put(name, e.getValue());
            }
        }
        for (String k : arrays.keySet()) {
            if (others.containsKey(k)) throw new ZipArchive.ZipFormatException(source + ": entries '" + k + "' and '" + k + ".npy' (numpy reads one key for both)");
        }
        return new Npz(arrays, others);
    }
}
