package k3j.harness.planted;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Planted violations of the file doors (FileDoorsGate shows its rule fails on each): a file written, opened for writing
 * and read outside k3j.io. Never run; only its bytecode is read.
 */
public final class DoorBreaker {
    private DoorBreaker() {}

    public static void writesAround(Path p) throws IOException {
        Files.writeString(p, "over an input");
    }

    public static void opensForWriting(Path p) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE)) {
            ch.force(true);
        }
        try (RandomAccessFile r = new RandomAccessFile(p.toFile(), "rw")) {
            r.setLength(0);
        }
    }

    public static byte[] readsUnbounded(Path p) throws IOException {
        return Files.readAllBytes(p);   // a FIFO hangs here; /dev/zero fills the heap
    }

    public static java.io.PrintWriter printsToAFile(String name) throws IOException {
        return new java.io.PrintWriter(name);
    }
}
