package k3j.api;

import java.util.OptionalLong;
import k3j.plan.MemInfo;

/**
 * The machine's memory a memory plan must fit, as /proc/meminfo states it.
 *
 * @param totalBytes     MemTotal in bytes, when known
 * @param availableBytes MemAvailable in bytes, when known: a plan whose total passes it is refused
 */
public record MachineMemory(OptionalLong totalBytes, OptionalLong availableBytes) {
    /** Checks that both figures are given (empty when unknown) and not negative. */
    public MachineMemory {
        if (totalBytes == null || availableBytes == null) throw new IllegalArgumentException("give OptionalLong.empty() for a figure that is not known");
        if (totalBytes.orElse(0) < 0 || availableBytes.orElse(0) < 0) throw new IllegalArgumentException("memory cannot be negative: total " + totalBytes + ", available " + availableBytes);
    }

    /** {@return this machine's memory, read from /proc/meminfo (both figures empty where it cannot be read)} */
    public static MachineMemory read() {
        return of(MemInfo.read());
    }

    static MachineMemory of(MemInfo m) {
        return new MachineMemory(m.totalBytes(), m.availableBytes());
    }

    MemInfo memInfo() {
        return new MemInfo(totalBytes, availableBytes);
    }
}
