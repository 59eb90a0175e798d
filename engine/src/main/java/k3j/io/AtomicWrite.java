package k3j.io;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * The one way a file is written (docs/files.md): an output file or folder appears whole or not at all, a temporary
 * beside it, forced to disk, renamed over the target (a crash or a full disk leaves the old one or the new one, never
 * a mix; a kill leaves at most a {@code .NAME...tmp} file, never a complete-looking NAME). The target is checked as an
 * output ({@link Outputs#checkFile}: never a link, a device, a FIFO or a folder) before any work and again just before
 * the rename. Errors name the path, the option that asked for it, and the cause. The parts of an output under
 * construction (a {@code .partial} file, a journal, a file of a folder being filled) are opened through {@link #part}
 * and renamed into place by {@link #commit}: nothing else opens a file for writing.
 */
public final class AtomicWrite {
    private AtomicWrite() {}

    /** Writes what {@code body} produces. */
    public interface Body {
        void write(OutputStream out) throws IOException;
    }

    /** Writes {@code bytes} to {@code target} atomically; {@code what} names the output in messages (e.g. "--out"). */
    public static void bytes(Path target, String what, byte[] bytes) throws IOException {
        write(target, what, out -> out.write(bytes));
    }

    public static void string(Path target, String what, String text) throws IOException {
        bytes(target, what, text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    public static void write(Path target, String what, Body body) throws IOException {
        checkTarget(target, what);
        // a pending interrupt (a cancelled read elsewhere in the run) would close the channel mid-write: the
        // output is written regardless and the interrupt is restored afterwards
        boolean interrupted = Thread.interrupted();
        try {
            replace(target.toAbsolutePath(), ch -> {
                OutputStream out = Channels.newOutputStream(ch);
                // the body may close what it is given (a JsonGenerator does): the channel must stay open for force()
                body.write(new java.io.FilterOutputStream(out) {
                    @Override
                    public void write(byte[] b, int off, int len) throws IOException {
                        out.write(b, off, len);
                    }

                    @Override
                    public void close() throws IOException {
                        flush();
                    }
                });
                out.flush();
            });
        } catch (IOException e) {
            throw new IOException("cannot write " + target + " (" + what + "): " + SafeFiles.why(e), e);
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /**
     * Writes the folder {@code target} whole ({@link #replaceFolder}): {@code content} fills a temporary
     * folder, which replaces the target only when complete. An existing target must be empty or be what
     * {@code replaceable} accepts (a previous output of the same kind); anything else is refused, untouched.
     */
    public static void folder(Path target, String what, java.util.function.Predicate<Path> replaceable, FolderContent content) throws IOException {
        checkFolder(target, what, replaceable);
        boolean interrupted = Thread.interrupted();
        try {
            replaceFolder(target, content);
        } catch (IOException e) {
            throw new IOException("cannot write " + target + " (" + what + "): " + SafeFiles.why(e), e);
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    /** The checks of {@link #folder} alone, for a command to make before any work. */
    public static void checkFolder(Path target, String what, java.util.function.Predicate<Path> replaceable) throws IOException {
        Outputs.checkFolder(target, what);
        if (Files.isDirectory(target)) {
            boolean empty;
            try (var s = Files.list(target)) {
                empty = s.findAny().isEmpty();
            }
            if (!empty && !replaceable.test(target)) {
                throw new IOException("cannot write " + target + " (" + what + "): it is a folder that holds other files; name an empty or new folder");
            }
        }
    }

    /**
     * Refuses, before any work, an output path that cannot be written ({@link Outputs#checkFile}: its folder
     * missing or not writable, the path a folder, a device or a FIFO). A run checks its outputs up front so no
     * token is printed for a run whose results would be lost.
     */
    public static void checkTarget(Path target, String what) throws IOException {
        Outputs.checkFile(target, what);
    }

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

    /**
     * Replaces {@code target} with what {@code content} writes into a fresh temporary beside it, forced to disk and
     * renamed over it when complete; the target is checked as an output before and again just before the rename. The
     * caller names the output in its own errors; {@link #write} and {@link #bytes} add the option's name.
     */
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
    static void replaceFolder(Path target, FolderContent content) throws IOException {
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
