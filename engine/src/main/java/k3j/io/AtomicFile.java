package k3j.io;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/** Replacing a file so that a crash leaves the old one or the new one, never a mix: a temp file beside it, fsync, rename. */
public final class AtomicFile {
    /** Writes the new content into the channel it is given. */
    @FunctionalInterface
    public interface Content {
        void write(FileChannel ch) throws IOException;
    }

    private AtomicFile() {}

    public static void replace(Path target, Content content) throws IOException {
        Path tmp = Files.createTempFile(target.toAbsolutePath().getParent(), "." + target.getFileName(), ".tmp");
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                content.write(ch);
                ch.force(true);
            }
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }
}
