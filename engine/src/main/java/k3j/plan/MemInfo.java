package k3j.plan;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;

/**
 * This machine's memory, from /proc/meminfo (MemTotal, MemAvailable: what can be allocated without
 * swapping, not MemFree), and this process's peak resident set from /proc/self/status (VmHWM). Empty
 * where the kernel does not say (not Linux): the plan then prints no "available" line and refuses nothing.
 */
public record MemInfo(OptionalLong totalBytes, OptionalLong availableBytes) {

    public static MemInfo read() {
        String text = readQuietly(Path.of("/proc/meminfo"));
        return text == null ? new MemInfo(OptionalLong.empty(), OptionalLong.empty()) : parse(text);
    }

    public static MemInfo parse(String meminfo) {
        return new MemInfo(kib(meminfo, "MemTotal:"), kib(meminfo, "MemAvailable:"));
    }

    /** Peak RSS of this process (VmHWM), measured: quote this, not the plan (pitfall 28). */
    public static OptionalLong peakRss() {
        String text = readQuietly(Path.of("/proc/self/status"));
        return text == null ? OptionalLong.empty() : kib(text, "VmHWM:");
    }

    /** Current RSS of this process (VmRSS). */
    public static OptionalLong rss() {
        String text = readQuietly(Path.of("/proc/self/status"));
        return text == null ? OptionalLong.empty() : kib(text, "VmRSS:");
    }

    /** The "KEY  N kB" line's N × 1024, or empty. */
    static OptionalLong kib(String text, String key) {
        for (String line : text.split("\n")) {
            if (!line.startsWith(key)) continue;
            String[] f = line.substring(key.length()).trim().split("\\s+");
            try {
                long v = Long.parseLong(f[0]);
                return OptionalLong.of(f.length > 1 && f[1].equals("kB") ? v * 1024 : v);
            } catch (NumberFormatException e) {
                return OptionalLong.empty();
            }
        }
        return OptionalLong.empty();
    }

    private static String readQuietly(Path p) {
        try {
            return k3j.io.SafeFiles.readSystemFile(p, 1 << 20);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }
}
