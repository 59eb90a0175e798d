package k3j.io;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * Reading a file the user named, safely: it must be a regular file (a FIFO would block the open or the
 * read forever, {@code /dev/zero} would fill the heap), judged by its type BEFORE it is opened, and its size
 * is checked against a cap before a byte is allocated. Messages name the file and say what it is.
 */
public final class SafeFiles {
    private SafeFiles() {}

    /** The file's size; an {@link IOException} naming it when it is absent or not a regular file (symlinks are followed). */
    public static long requireRegular(Path file, String what) throws IOException {
        BasicFileAttributes a;
        try {
            a = Files.readAttributes(file, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new IOException(file + ": no such file (" + what + ")");
        }
        if (!a.isRegularFile()) throw new IOException(file + " is " + kind(file, a) + ", not a regular file: refused as " + what + " before opening it");
        return a.size();
    }

    /** Whether {@code file} is a regular file (no exception: for directory scans that refuse by type). */
    public static boolean isRegular(Path file) {
        return Files.isRegularFile(file);
    }

    /** What a non-regular path is, for messages: "a FIFO", "a directory", "a device or socket", "a symbolic link". */
    public static String kind(Path file, BasicFileAttributes a) {
        if (a.isDirectory()) return "a directory";
        if (a.isSymbolicLink()) return "a symbolic link";
        try {
            Object mode = Files.getAttribute(file, "unix:mode");
            if (mode instanceof Integer m) {
                switch (m & 0xF000) {
                    case 0x1000: return "a FIFO";
                    case 0x2000: return "a character device";
                    case 0x6000: return "a block device";
                    case 0xC000: return "a socket";
                    default: break;
                }
            }
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            // no unix view: the generic word below still refuses it
        }
        return "a special file";
    }

    /** The whole file, at most {@code cap} bytes, refused by type and size before reading (and again if it grew while read). */
    public static byte[] readAll(Path file, long cap, String what) throws IOException {
        long size = requireRegular(file, what);
        if (size > cap) throw new IOException(file + " is " + size + " bytes, more than " + cap + " allowed for " + what + ": not read");
        try (InputStream in = Files.newInputStream(file)) {
            byte[] b = in.readNBytes((int) size);
            if (b.length != size || in.read() >= 0) throw new IOException(file + " changed size while it was read (" + what + ")");
            return b;
        }
    }

    /** An I/O failure as one line: its message, or its class when it has none (an EOFException has none). */
    public static String why(IOException e) {
        String m = e.getMessage();
        if (e instanceof java.io.EOFException) return "the file ends early (truncated)" + (m == null ? "" : ": " + m);
        if (e instanceof java.nio.file.NoSuchFileException) return "no such file";
        if (e instanceof java.nio.file.AccessDeniedException) return "permission denied";
        if (e instanceof java.nio.file.FileSystemException f && f.getReason() != null) return f.getReason();
        return m == null || m.isBlank() ? e.getClass().getSimpleName() : m;
    }
}
