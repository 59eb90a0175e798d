package k3j.io;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * An output file appears whole or not at all ({@link AtomicFile}: a temporary beside it, forced to disk, renamed
 * over the target). A failure (a full disk, a missing folder, a kill) leaves no file at the target and no
 * temporary behind (a kill leaves at most a {@code .NAME...tmp} file, never a complete-looking NAME). Errors name
 * the path, the option that asked for it, and the cause; the folder is checked before any work.
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
            AtomicFile.replace(target.toAbsolutePath(), ch -> {
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
     * Writes the folder {@code target} whole ({@link AtomicFile#replaceFolder}): {@code content} fills a temporary
     * folder, which replaces the target only when complete. An existing target must be empty or be what
     * {@code replaceable} accepts (a previous output of the same kind); anything else is refused, untouched.
     */
    public static void folder(Path target, String what, java.util.function.Predicate<Path> replaceable, AtomicFile.FolderContent content) throws IOException {
        checkFolder(target, what, replaceable);
        boolean interrupted = Thread.interrupted();
        try {
            AtomicFile.replaceFolder(target, content);
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
}
