package k3j.io;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Replacing a file or a folder so that a crash or a full disk leaves the old one or the new one, never a mix: a
 * temporary beside it, forced to disk, renamed over it. The target is checked again just before the rename
 * ({@link Outputs#checkFile}): a device or FIFO is never replaced.
 */
public final class AtomicFile {
    /** Writes the new content into the channel it is given. */
    @FunctionalInterface
    public interface Content {
        void write(FileChannel ch) throws IOException;
    }

    /** Writes a folder's new content into the (empty, temporary) folder it is given. */
    @FunctionalInterface
    public interface FolderContent {
        void write(Path dir) throws IOException;
    }

    private AtomicFile() {}

    /**
     * A part of an output under construction opened for writing: a temporary beside it, a {@code .partial} file or a
     * journal of a resumable write, a file of a folder {@link #replaceFolder} is filling, a scratch file. The one other
     * way a file is opened for writing besides {@link #replace}: never through a symbolic link (a link there would write
     * where it points) and never a device or FIFO; {@code how} adds CREATE, CREATE_NEW, APPEND or TRUNCATE_EXISTING.
     */
    public static FileChannel part(Path file, StandardOpenOption... how) throws IOException {
        if (Files.isSymbolicLink(file)) throw new IOException(file + " is a symbolic link: a part of an output is written only where it is named; remove the link");
        var a = Files.exists(file, java.nio.file.LinkOption.NOFOLLOW_LINKS) ? Files.readAttributes(file, java.nio.file.attribute.BasicFileAttributes.class, java.nio.file.LinkOption.NOFOLLOW_LINKS) : null;
        if (a != null && !a.isRegularFile()) throw new IOException(file + " is " + SafeFiles.kind(file, a) + ", not a regular file: not written");
        java.util.Set<java.nio.file.OpenOption> o = new java.util.HashSet<>(java.util.List.of(how));
        o.add(StandardOpenOption.WRITE);
        o.add(java.nio.file.LinkOption.NOFOLLOW_LINKS);
        return FileChannel.open(file, o);
    }

    /**
     * Renames a complete part (written through {@link #part} and forced) over its {@code target} in one step, after the
     * target is checked again as an output ({@link Outputs#checkFile}: never a link, a device, a FIFO or a folder).
     */
    public static void commit(Path part, Path target) throws IOException {
        Outputs.checkFile(target, "output");
        Files.move(part, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    /** A new file {@code file} (in a folder being filled, or a temporary) holding {@code bytes}: {@link #part} with CREATE_NEW. */
    public static void create(Path file, byte[] bytes) throws IOException {
        try (FileChannel ch = part(file, StandardOpenOption.CREATE_NEW)) {
            java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(bytes);
            while (b.hasRemaining()) ch.write(b);
        }
    }

    /**
     * A new, empty file or folder beside {@code target} with a name no other has, created with the permissions the
     * umask gives (Files.createTempFile would make it 0600, and the output would keep that).
     */
    private static Path fresh(Path target, boolean folder) throws IOException {
        java.security.SecureRandom random = new java.security.SecureRandom();
        for (int tries = 0; ; tries++) {
            Path p = target.resolveSibling("." + target.getFileName() + "." + Long.toUnsignedString(random.nextLong(), 36) + (folder ? "" : ".tmp"));
            try {
                return folder ? Files.createDirectory(p) : Files.createFile(p);
            } catch (java.nio.file.FileAlreadyExistsException e) {
                if (tries >= 16) throw e;
            }
        }
    }

    public static void replace(Path target, Content content) throws IOException {
        Path abs = target.toAbsolutePath();
        Outputs.checkFile(abs, "output");
        Path tmp = fresh(abs, false);
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                content.write(ch);
                ch.force(true);
            }
            Outputs.checkFile(abs, "output");
            Files.move(tmp, abs, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /**
     * Replaces the folder {@code target} whole: {@code content} fills a temporary folder beside it, every file is
     * forced to disk, then the old folder (if any) is moved aside, the new one renamed into its place and the old
     * one deleted. A failure leaves the old folder as it was and no temporary behind.
     */
    public static void replaceFolder(Path target, FolderContent content) throws IOException {
        Path abs = target.toAbsolutePath();
        Outputs.checkFolder(abs, "output");
        Path tmp = fresh(abs, true);
        Path old = null;
        try {
            content.write(tmp);
            try (Stream<Path> s = Files.walk(tmp)) {
                for (Path f : s.filter(Files::isRegularFile).toList()) {
                    try (FileChannel ch = FileChannel.open(f, StandardOpenOption.WRITE)) {
                        ch.force(true);
                    }
                }
            }
            Outputs.checkFolder(abs, "output");
            if (Files.exists(abs)) {
                old = abs.resolveSibling("." + abs.getFileName() + ".old-" + Long.toHexString(System.nanoTime()));
                Files.move(abs, old, StandardCopyOption.ATOMIC_MOVE);
            }
            Files.move(tmp, abs, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException | RuntimeException e) {
            if (old != null && !Files.exists(abs)) Files.move(old, abs, StandardCopyOption.ATOMIC_MOVE);   // put the old one back
            old = null;
            throw e;
        } finally {
            deleteTree(tmp);
            if (old != null) deleteTree(old);
        }
    }

    private static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path f : s.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(f);
        }
    }
}
