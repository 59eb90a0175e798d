package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.io.CheckpointException;
import k3j.io.CheckpointIndex;
import k3j.plan.Human;
import k3j.trunk.Progress;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkPacker;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 pack-trunk MODEL OUT}: writes OUT/trunk.bin and OUT/trunk.json (docs/semantics.md §5.2-5.3). Exit 0
 * when packed (or already packed from these weights), 1 when the checkpoint cannot be packed (a layer
 * spanning shards, a gap, an unreadable shard) or the copy fails, 2 on bad arguments.
 */
@Command(name = "pack-trunk", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Pack every layer's non-expert tensors into OUT/trunk.bin + OUT/trunk.json for streaming (--trunk OUT).",
        footer = "Exit codes: 0 packed, 1 cannot pack (the reason names the layer and bytes), 2 bad arguments.")
final class PackTrunkCommand implements Callable<Integer> {
    @CommandLine.Mixin
    ModelFolder modelFolder;

    @Parameters(index = "1", paramLabel = "OUT", description = "the directory to write trunk.bin and trunk.json into")
    Path out;

    @Option(names = "--force", description = "repack even when OUT already holds a trunk packed from these weights")
    boolean force;

    @Option(names = "--gather", description = "pack a layer that is not one contiguous run in one shard tensor by tensor instead of "
            + "refusing it (small fixtures written by the safetensors library; the released checkpoint needs no gathering)")
    boolean gather;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter o = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Path model = modelFolder.folder();
        try {
            k3j.io.Outputs.checkFolder(out, "OUT");
            if (Files.isDirectory(out)) {
                k3j.io.Outputs files = new k3j.io.Outputs().input(model, "a file of the model folder");
                files.file(out.resolve(TrunkManifest.BIN), "OUT");
                files.file(out.resolve(TrunkManifest.JSON), "OUT");
            }
        } catch (java.io.IOException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        try {
            long t0 = System.nanoTime();
            CheckpointIndex index = CheckpointIndex.open(model);
            o.printf(Locale.ROOT, "indexed %d tensors from %d shards in %.2f s%n", index.size(), index.shards().size(), (System.nanoTime() - t0) / 1e9);
            if (!force && Files.isRegularFile(out.resolve(TrunkManifest.JSON))) {
                try {
                    // reused only when every tensor's data is what the trunk holds: the source is read, as a pack reads it
                    TrunkManifest m = TrunkManifest.read(out);
                    k3j.trunk.DataBinding.Result r = TrunkPacker.rebind(m, index);
                    o.printf(Locale.ROOT, "%s already holds a trunk packed from these weights (%d layers, %s; data digests of %d tensors match, "
                                    + "%.2f GB read in %.1f s)%s; --force repacks%n", out, m.layerCount(), Human.bytes(m.fileSize()), r.tensorsHashed(),
                            r.bytesHashed() / 1e9, r.seconds(), r.changedShards().isEmpty() ? "" : "; trunk.json re-bound to the shards' current file identity");
                    return ExitCode.OK;
                } catch (TrunkException stale) {
                    o.println("repacking: the trunk in " + out + " does not open against this checkpoint (" + stale.getMessage() + ")");
                }
            }
            TrunkPacker.Layout layout = TrunkPacker.layout(index, gather);
            Path config = model.resolve("config.json");
            if (Files.isRegularFile(config)) {
                int want = ConfigReader.read(config).layerCount();
                if (want != layout.layers().size()) {
                    err.println("k3 pack-trunk: " + model + ": the shards hold trunk tensors for " + layout.layers().size()
                            + " layers, config.json says " + want + " (a partial download?); refusing");
                    return ExitCode.RUNTIME;
                }
            }
            TrunkManifest.Layer largest = layout.layers().getFirst();
            for (TrunkManifest.Layer l : layout.layers()) if (l.nbytes() > largest.nbytes()) largest = l;
            o.printf(Locale.ROOT, "packing %d layers (%s<L>.*, routed experts excluded): %s, %s%n",
                    layout.layers().size(), layout.prefix(), Human.bytes(layout.fileSize()),
                    layout.gathered() ? "some layers GATHERED tensor by tensor (not contiguous in the shards)" : "every layer one contiguous run in one shard");
            o.flush();
            long t1 = System.nanoTime();
            TrunkManifest m = TrunkPacker.pack(index, layout, out, Progress.stdout("packed", layout.layers().size(),
                    layout.layers().stream().mapToLong(TrunkManifest.Layer::nbytes).sum()),
                    s -> err.println("k3: note: " + s), null);
            double s = (System.nanoTime() - t1) / 1e9;
            o.printf(Locale.ROOT, "wrote %s: %s across %d layers in %.1f s (%s/s), re-read and CRC-32C verified%n",
                    m.bin(), Human.bytes(m.fileSize()), m.layerCount(), s, Human.bytes(m.fileSize() / s));
            o.printf(Locale.ROOT, "largest layer run: %s (layer %d)  <- the streaming slot size%n", Human.bytes(largest.nbytes()), largest.layer());
            o.println("wrote " + m.json());
            return ExitCode.OK;
        } catch (TrunkException | CheckpointException | ConfigException e) {
            err.println("k3 pack-trunk: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
    }
}
