package k3j.io;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** An output replaced whole gets the permissions the umask gives any new file (as `touch` would), not a temporary file's 0600. */
class AtomicWriteTest {
    @Test
    void outputsAreCreatedUnderTheUmask(@TempDir Path dir) throws Exception {
        Set<PosixFilePermission> plainFile = Files.getPosixFilePermissions(Files.createFile(dir.resolve("plain")));
        Set<PosixFilePermission> plainFolder = Files.getPosixFilePermissions(Files.createDirectory(dir.resolve("plain-dir")));
        assertNotEquals(PosixFilePermissions.fromString("rw-------"), plainFile, "this machine's umask is 077: it cannot tell the two apart");
        Path out = dir.resolve("out.json");
        AtomicWrite.replace(out, ch -> ch.write(ByteBuffer.wrap(new byte[] {'{', '}'})));
        assertEquals(PosixFilePermissions.toString(plainFile), PosixFilePermissions.toString(Files.getPosixFilePermissions(out)), "a file output");
        Path folder = dir.resolve("dump");
        AtomicWrite.replaceFolder(folder, d -> Files.writeString(d.resolve("manifest.json"), "{}"));
        assertEquals(PosixFilePermissions.toString(plainFolder), PosixFilePermissions.toString(Files.getPosixFilePermissions(folder)), "a folder output");
        try (var left = Files.list(dir)) {
            assertEquals(Set.of("plain", "plain-dir", "out.json", "dump"), Set.copyOf(left.map(p -> p.getFileName().toString()).toList()), "no temporary is left");
        }
    }
}
