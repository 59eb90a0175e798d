package k3j.cli;

import java.util.List;
import k3j.compare.LayerSelection;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** Which layers a per-layer check covers ({@code --layers}) and whether it sweeps their routed experts ({@code --experts}): conform and bisect. */
final class LayerScope {
    @Option(names = "--layers", paramLabel = "SPEC", description = "layers to check: 0-92, 40,41,50-60 (default all)")
    String layers;

    @Option(names = "--experts", description = "also judge EVERY routed expert of the selected MoE layers on the dump's probes (its expert sweep), "
            + "not only the ones the prompt routes")
    boolean experts;

    @Spec(Spec.Target.MIXEE)
    CommandSpec mixee;

    /**
     * Checks --layers against the model's config.json before anything is planned or loaded (a layer past the
     * model's num_hidden_layers, or a malformed list, is refused here, not after the weights are read).
     */
    void check(java.nio.file.Path config) {
        if (layers != null) select(k3j.config.ConfigReader.read(config).layerCount());
    }

    /** The selected layers of a model of {@code layerCount} layers, or a usage error naming what is wrong with --layers. */
    List<Integer> select(int layerCount) {
        if (layers != null && layers.isBlank()) {
            throw new CommandLine.ParameterException(mixee.commandLine(), "--layers '" + layers + "' names no layer: give layers like 0-" + (layerCount - 1)
                    + " or 40,41, or leave --layers out to check all " + layerCount);
        }
        try {
            return LayerSelection.parse(layers, layerCount);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(mixee.commandLine(), e.getMessage());
        }
    }
}
