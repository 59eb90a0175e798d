package k3j.io;

import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * The one reading path for every file a command reads (docs/files.md): it must be a regular file (a FIFO would
 * block the open or the read forever, {@code /dev/zero} would fill the heap), judged by its type BEFORE it is
 * opened, and its size is checked against a cap before a byte is allocated; sizes a file's header declares are
 * then checked against the file ({@link #requireSize}). Messages name the file, say what it is and what to do.
 */
public final class SafeFiles {
    private SafeFiles() {}

    /** The file's size; an {@link IOException} naming it when it is absent or not a regular file (symlinks are followed). */
    public static long requireRegular(Path file, String what) throws IOException {
        BasicFileAttributes a;
        try {
            a = Files.readAttributes(file, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new IOException(file + ": no such file (" + what + "): check the path");
        }
        if (!a.isRegularFile()) throw new IOException(file + " is " + kind(file, a) + ", not a regular file: refused as " + what + " before opening it (name a regular file)");
        return a.size();
    }

    /** The file opened for reading, after {@link #requireRegular} (never a FIFO: opening one would block). */
    public static FileChannel open(Path file, String what) throws IOException {
        requireRegular(file, what);
        return FileChannel.open(file, StandardOpenOption.READ);
    }

    /** The file opened as a stream, after {@link #requireRegular} (never a FIFO or a device). */
    public static InputStream newInputStream(Path file, String what) throws IOException {
        requireRegular(file, what);
        return Files.newInputStream(file);
    }

    /**
     * A file of the kernel's (/proc, /sys): regular files that say their size is 0, read up to {@code cap} bytes,
     * more refused. Only for those: every other file is read by {@link #readAll(Path, long, String)}.
     */
    public static String readSystemFile(Path file, int cap) throws IOException {
        requireRegular(file, "a system file");
        try (InputStream in = Files.newInputStream(file)) {
            return new String(readAll(in, cap, file.toString()), java.nio.charset.StandardCharsets.UTF_8);
        }
    }

    /** The file's size, refused above {@code cap} bytes before anything is read. */
    public static long requireSize(Path file, long cap, String what) throws IOException {
        long size = requireRegular(file, what);
        if (size > cap) throw tooLarge(file.toString(), size, cap, what);
        return size;
    }

    /** A stream (stdin) read whole, at most {@code cap} bytes: more is refused after reading cap + 1, never allocated. */
    public static byte[] readAll(InputStream in, long cap, String what) throws IOException {
        byte[] b = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, cap + 1));
        if (b.length > cap) throw new IOException(what + " holds more than " + cap + " bytes, the most allowed: not read (split it, or give a smaller input)");
        return b;
    }

    /**
     * One line of a stream (stdin) without its LF (and CR), at most {@code cap} bytes, as UTF-8; null at the end.
     * A longer line is refused once cap + 1 bytes were seen, never held whole.
     */
    public static String readLine(InputStream in, int cap, String what) throws IOException {
        java.io.ByteArrayOutputStream line = new java.io.ByteArrayOutputStream();
        int b;
        while ((b = in.read()) >= 0 && b != '\n') {
            if (line.size() >= cap) throw new IOException(what + ": a line longer than " + cap + " bytes, the most allowed: not read");
            line.write(b);
        }
        if (b < 0 && line.size() == 0) return null;
        byte[] a = line.toByteArray();
        int n = a.length > 0 && a[a.length - 1] == '\r' ? a.length - 1 : a.length;
        return new String(a, 0, n, java.nio.charset.StandardCharsets.UTF_8);
    }

    private static IOException tooLarge(String file, long size, long cap, String what) {
        return new IOException(file + " is " + size + " bytes, more than the " + cap + " allowed for " + what + ": not read (is it the right file?)");
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
        long size = requireSize(file, cap, what);
        try (InputStream in = Files.newInputStream(file)) {
            byte[] b = in.readNBytes((int) size);
            if (b.length != size || in.read() >= 0) throw new IOException(file + " changed size while it was read (" + what + ")");
            return b;
        }
    }

    /**
     * A failure as one line for a user: what happened to which file, in words, never a Java class name (a
     * NoSuchFileException's message is only the path; an EOFException has none).
     */
    public static String why(Throwable e) {
        if ((e instanceof java.io.UncheckedIOException || e.getClass() == RuntimeException.class) && e.getCause() != null) return why(e.getCause());
        String m = e.getMessage();
        if (e instanceof java.io.EOFException) return "the file ends early (truncated)" + (m == null ? "" : ": " + m);
        if (e instanceof java.nio.file.FileSystemException f) {
            String file = f.getFile() == null ? "" : f.getFile() + (f.getOtherFile() == null ? "" : " -> " + f.getOtherFile()) + ": ";
            if (f instanceof NoSuchFileException) return file + "no such file or folder (or it cannot be created there)";
            if (f instanceof java.nio.file.AccessDeniedException) return file + "permission denied";
            if (f instanceof java.nio.file.FileAlreadyExistsException) return file + "already exists";
            if (f instanceof java.nio.file.DirectoryNotEmptyException) return file + "the folder is not empty";
            if (f instanceof java.nio.file.NotDirectoryException) return file + "not a folder";
            if (f.getReason() != null) return file + f.getReason();
        }
        if (e instanceof OutOfMemoryError) return "out of memory (" + (m == null ? "the heap is full" : m) + ")";
        return m == null || m.isBlank() ? "an I/O failure with no message" : m;
    }
}
