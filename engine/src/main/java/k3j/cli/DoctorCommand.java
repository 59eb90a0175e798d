package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.io.DirectIo;
import k3j.model.ModelSizes;
import k3j.plan.AutoBudget;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.plan.Preset;
import k3j.trunk.DirectReader;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkPlan;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 doctor [MODEL]}: what this machine brings to a run: cores, memory, the JDK and its Vector API,
 * the O_DIRECT read bandwidth of the disk holding the model (or the packed trunk), and which preset fits
 * (docs/semantics.md §7.2). Reads, never writes, except a temporary file when there is nothing to read.
 */
@Command(name = "doctor", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Check this machine for a run: cores, memory, JDK, Vector API, O_DIRECT disk bandwidth, the preset that fits.")
final class DoctorCommand implements Callable<Integer> {
    @Parameters(index = "0", arity = "0..1", paramLabel = "MODEL", description = "the model directory (its largest shard is read)")
    Path model;

    @Option(names = "--trunk", paramLabel = "DIR", description = "a packed trunk directory: read trunk.bin instead, and plan the auto budget over it")
    Path trunk;

    @Option(names = "--read-mb", paramLabel = "MB", description = "megabytes to read for the bandwidth figure (default ${DEFAULT-VALUE})")
    long readMb = 512;

    @CommandLine.Mixin
    ListPresetsOption listPresets;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        if (readMb <= 0) throw new CommandLine.ParameterException(spec.commandLine(), "--read-mb must be positive");
        if (model != null && !Files.isDirectory(model)) {
            throw new CommandLine.ParameterException(spec.commandLine(), Files.exists(model) ? "not a folder: " + model : "no such folder: " + model);
        }
        if (trunk != null && !Files.isDirectory(trunk)) throw new CommandLine.ParameterException(spec.commandLine(), "--trunk: no such folder: " + trunk);
        out.println("k3 doctor");
        String cpu = cpuModel();
        out.printf(Locale.ROOT, "  cores        : %d available to the JVM%s%n", Runtime.getRuntime().availableProcessors(), cpu.isEmpty() ? "" : " (" + cpu + ")");
        MemInfo mem = MemInfo.read();
        out.printf(Locale.ROOT, "  memory       : MemTotal %s, MemAvailable %s%n",
                mem.totalBytes().isPresent() ? Human.bytes(mem.totalBytes().getAsLong()) : "unknown",
                mem.availableBytes().isPresent() ? Human.bytes(mem.availableBytes().getAsLong()) : "unknown");
        out.printf(Locale.ROOT, "  JDK          : %s %s (%s)%n", System.getProperty("java.vendor"), Runtime.version(), System.getProperty("java.home"));
        out.println("  Vector API   : " + vectorApi());
        out.println("  FMA          : " + fmaSupport(System.getProperty("os.arch"), cpuFlags()));
        disk(out);
        ModelSizes sizes = null;
        if (model != null) {
            try {
                sizes = ModelSizes.of(model);
                out.printf(Locale.ROOT, "  model        : %s: weights %s (routed experts %s: %d x %s; trunk and tables %s)%n", model,
                        Human.bytes(sizes.weightBytes()), Human.bytes(sizes.routedExpertBytes()), sizes.poolExperts(),
                        Human.bytes(sizes.expertBytes()), Human.bytes(sizes.residentBytes()));
            } catch (RuntimeException e) {
                out.println("  model        : cannot be sized: " + e.getMessage());
                return ExitCode.RUNTIME;
            }
        }
        out.println("which preset fits");
        if (mem.availableBytes().isEmpty()) {
            out.println("  MemAvailable unknown: choose --trunk-gb and --cache-gb by hand");
            return ExitCode.OK;
        }
        if (sizes != null && sizes.weightBytes() < 0.5 * mem.availableBytes().getAsLong()) {
            out.printf(Locale.ROOT, "  none needed: the whole model (%s) fits in RAM (%s available); run it resident, without --trunk%n",
                    Human.bytes(sizes.weightBytes()), Human.bytes(mem.availableBytes().getAsLong()));
            return ExitCode.OK;
        }
        out.println("  (the presets are sized for " + ModelSizes.RELEASED.name() + ", " + Human.bytes(ModelSizes.RELEASED.weightBytes())
                + (sizes == null ? "; no MODEL given, so its sizes are assumed)" : ")"));
        Preset.Recommendation r = Preset.recommend(mem.availableBytes().getAsLong());
        out.println(r.preset() == null ? "  none of the ordinary presets: " + r.expect()
                : String.format(Locale.ROOT, "  --preset %s (trunk %.2f GB / expert cache %.2f GB), expect %s", r.preset().id(),
                        r.preset().trunkGb(), r.preset().cacheGb(), r.expect()));
        try {
            AutoBudget auto = AutoBudget.of(mem);
            out.println("  --preset auto: " + auto.line());
            if (trunk != null) {
                TrunkManifest m = TrunkManifest.read(trunk);
                TrunkPlan p = TrunkPlan.of(m.runSizes(), (long) (auto.trunkGb() * 1e9), 2, TrunkPlan.orderFromEnvironment());
                out.print(p.describe().indent(2));
                out.flush();
            }
        } catch (IllegalStateException | TrunkException e) {
            out.println("  --preset auto: " + e.getMessage());
        }
        return ExitCode.OK;
    }

    private void disk(PrintWriter out) {
        Path file = null;
        boolean temp = false;
        try {
            if (trunk != null) {
                file = trunk.resolve(TrunkManifest.BIN);
            } else if (model != null) {
                file = largestShard(model);
            }
            if (file == null) {
                Path dir = model != null && Files.isDirectory(model) ? model : Path.of(System.getProperty("java.io.tmpdir"));
                file = Files.createTempFile(dir, "k3-doctor-", ".bin");
                temp = true;
                fill(file, readMb << 20);
            }
            long size = Files.size(file);
            long len = DirectIo.alignDown(Math.min(readMb << 20, size));
            if (len == 0) {
                out.println("  disk         : " + file + " is smaller than one 4 KiB block; nothing to measure");
                return;
            }
            StringBuilder note = new StringBuilder();
            try (DirectReader r = DirectReader.open(file, true, note::append); Arena arena = Arena.ofConfined()) {
                long chunk = 64L << 20;
                MemorySegment buf = DirectIo.allocate(arena, chunk);
                long t0 = System.nanoTime();
                for (long pos = 0; pos < len; pos += chunk) r.read(pos, Math.min(chunk, len - pos), buf, -1);
                double s = (System.nanoTime() - t0) / 1e9;
                out.printf(Locale.ROOT, "  disk         : %s read %s of %s in %.2f s: %.0f MB/s%s%n", r.direct() ? "O_DIRECT" : "BUFFERED",
                        Human.bytes(len), temp ? "a temporary file in " + file.getParent() : file, s, len / 1e6 / s,
                        r.direct() ? "" : " (" + note + ")");
            }
        } catch (IOException | TrunkException e) {
            out.println("  disk         : cannot measure: " + e.getMessage());
        } finally {
            if (temp) {
                try {
                    Files.deleteIfExists(file);
                } catch (IOException ignored) {
                    // a temporary file left behind is harmless
                }
            }
        }
    }

    private static Path largestShard(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) throw new IOException(dir + " is not a directory");
        Path best = null;
        long size = -1;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "*.safetensors")) {
            for (Path p : ds) {
                long s = Files.size(p);
                if (s > size) {
                    size = s;
                    best = p;
                }
            }
        }
        return best;
    }

    private static void fill(Path f, long bytes) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(8 << 20);
        for (int i = 0; i < b.capacity(); i++) b.put(i, (byte) (i * 131 + (i >> 9)));
        try (FileChannel ch = k3j.io.AtomicWrite.part(f)) {
            for (long pos = 0; pos < bytes; ) {
                b.clear().limit((int) Math.min(b.capacity(), bytes - pos));
                while (b.hasRemaining()) pos += ch.write(b, pos);
            }
            ch.force(true);
        }
    }

    private static String cpuModel() {
        try {
            String flags = "";
            String name = "";
            for (String line : k3j.io.SafeFiles.readSystemFile(Path.of("/proc/cpuinfo"), 1 << 22).lines().toList()) {
                if (name.isEmpty() && line.startsWith("model name")) name = line.substring(line.indexOf(':') + 1).trim();
                if (flags.isEmpty() && line.startsWith("flags")) flags = " " + line.substring(line.indexOf(':') + 1).trim() + " ";
            }
            StringBuilder isa = new StringBuilder();
            for (String f : new String[] {"avx2", "fma", "avx512f"}) if (flags.contains(" " + f + " ")) isa.append(' ').append(f);
            return name + (isa.isEmpty() ? "" : ";" + isa);
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }

    /** The first "flags" line of /proc/cpuinfo, space-padded, or "" where there is none. */
    private static String cpuFlags() {
        try {
            for (String line : k3j.io.SafeFiles.readSystemFile(Path.of("/proc/cpuinfo"), 1 << 22).lines().toList()) {
                if (line.startsWith("flags")) return " " + line.substring(line.indexOf(':') + 1).trim() + " ";
            }
        } catch (IOException | RuntimeException e) {
            // no /proc: said below
        }
        return "";
    }

    /**
     * Whether the cores multiply-add in hardware. Every matvec path, scalar and Vector API alike, accumulates with a
     * fused multiply-add (docs/fp-contract.md, v2); without hardware FMA the JVM emulates it exactly, many times slower.
     */
    static String fmaSupport(String arch, String flags) {
        return switch (arch) {
            case "amd64", "x86_64" -> flags.isEmpty() ? "unknown (no cpu flags to read)"
                    : flags.contains(" fma ") ? "hardware"
                    : "ABSENT: every kernel's fused multiply-add is then emulated in software (same bits, many times slower)";
            case "aarch64" -> "hardware (every AArch64 core has it)";
            default -> "unknown on " + arch;
        };
    }

    private static String vectorApi() {
        if (ModuleLayer.boot().findModule("jdk.incubator.vector").isEmpty()) {
            return "ABSENT (run with --add-modules jdk.incubator.vector; bin/k3 does)";
        }
        try {
            return "present, preferred float vector " + jdk.incubator.vector.FloatVector.SPECIES_PREFERRED.vectorBitSize() + " bits ("
                    + jdk.incubator.vector.FloatVector.SPECIES_PREFERRED.length() + " lanes)";
        } catch (LinkageError e) {
            return "module present but unusable: " + e;
        }
    }
}
