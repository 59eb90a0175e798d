package k3j.serve;

import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Locale;
import java.util.function.BooleanSupplier;

/**
 * Whether the client of one TCP connection has hung up, read from the kernel's socket table ({@code /proc/net/tcp}
 * and {@code tcp6}). Jetty reads a connection only between requests, so a client that goes away while its whole
 * answer is generated would be seen only when the answer is written. The table shows it at once (the connection
 * leaves ESTABLISHED when the client's FIN or RST arrives) without reading the socket, so nothing sent behind the
 * request is taken. Where the table cannot be read or does not list the connection, it is never reported gone.
 */
final class PeerClosed implements BooleanSupplier {
    private static final Path TCP = Path.of("/proc/net/tcp"), TCP6 = Path.of("/proc/net/tcp6");
    /** The most of a socket table read (some 150 bytes a connection): past it the table is not read, and nobody is seen gone. */
    private static final int TABLE_CAP = 64 << 20;
    private static final String ESTABLISHED = "01";
    private static final BooleanSupplier UNKNOWN = () -> false;

    private final Path table;
    private final String local, remote;

    private PeerClosed(Path table, String local, String remote) {
        this.table = table;
        this.local = local;
        this.remote = remote;
    }

    /**
     * The watch over the connection from {@code remote}:{@code remotePort} to {@code local}:{@code localPort}.
     *
     * @return true once the client has closed or reset it; always false when the kernel's table does not list it
     */
    static BooleanSupplier of(InetAddress local, int localPort, InetAddress remote, int remotePort) {
        PeerClosed v4 = local instanceof Inet4Address && remote instanceof Inet4Address ? new PeerClosed(TCP, key(local, localPort), key(remote, remotePort)) : null;
        if (v4 != null && v4.state() != null) return v4;
        PeerClosed v6 = new PeerClosed(TCP6, key6(local, localPort), key6(remote, remotePort));
        return v6.state() != null ? v6 : UNKNOWN;
    }

    @Override
    public boolean getAsBoolean() {
        return !ESTABLISHED.equals(state());
    }

    /** The connection's state in the table (two hex digits), or null when it is not listed or the table cannot be read. */
    private String state() {
        String text;
        try {
            text = k3j.io.SafeFiles.readSystemFile(table, TABLE_CAP);
        } catch (IOException | RuntimeException e) {
            return null;
        }
        String[] lines = text.split("\n");
        for (int i = 1; i < lines.length; i++) {   // line 0: the header
            String[] f = lines[i].trim().split("\\s+", 5);
            if (f.length >= 4 && f[1].equals(local) && f[2].equals(remote)) return f[3];
        }
        return null;
    }

    /** An IPv4 address and port as the table prints them: the address as a 32-bit word in the machine's order, in hex. */
    private static String key(InetAddress a, int port) {
        return String.format(Locale.ROOT, "%08X:%04X", ByteBuffer.wrap(a.getAddress()).order(ByteOrder.nativeOrder()).getInt(), port);
    }

    /** An address (IPv4 as ::ffff:a.b.c.d) and port as tcp6 prints them: four 32-bit words in the machine's order. */
    private static String key6(InetAddress a, int port) {
        byte[] b = a.getAddress();
        if (b.length == 4) {
            byte[] m = new byte[16];
            m[10] = (byte) 0xff;
            m[11] = (byte) 0xff;
            System.arraycopy(b, 0, m, 12, 4);
            b = m;
        }
        ByteBuffer w = ByteBuffer.wrap(b).order(ByteOrder.nativeOrder());
        StringBuilder s = new StringBuilder(40);
        for (int i = 0; i < 4; i++) s.append(String.format(Locale.ROOT, "%08X", w.getInt()));
        return s.append(String.format(Locale.ROOT, ":%04X", port)).toString();
    }
}
