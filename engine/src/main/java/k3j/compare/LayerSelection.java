package k3j.compare;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import k3j.model.Binder;

/**
 * Which layers a run compares: {@code 0-92}, {@code 40,41,50-60}, or blank for all. Ranges are inclusive,
 * zero-based; a layer outside the model, a reversed range or a malformed item is an error, never ignored.
 */
public final class LayerSelection {
    private LayerSelection() {}

    public static List<Integer> parse(String spec, int layerCount) {
        List<Integer> all = new ArrayList<>();
        if (spec == null || spec.isBlank()) {
            for (int i = 0; i < layerCount; i++) all.add(i);
            return all;
        }
        TreeSet<Integer> set = new TreeSet<>();
        for (String item : spec.split(",")) {
            String s = item.trim();
            if (s.isEmpty()) throw new IllegalArgumentException("layer selection '" + spec + "' has an empty item");
            int dash = s.indexOf('-', 1);
            int a, b;
            try {
                a = Integer.parseInt(dash < 0 ? s : s.substring(0, dash).trim());
                b = dash < 0 ? a : Integer.parseInt(s.substring(dash + 1).trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("layer selection '" + spec + "': '" + s + "' is not a layer or a range like 40-60");
            }
            if (a > b) throw new IllegalArgumentException("layer selection '" + spec + "': range " + s + " runs backwards");
            if (a < 0 || b >= layerCount) throw new IllegalArgumentException("layer selection '" + spec + "': " + s + " is outside 0-" + (layerCount - 1));
            for (int i = a; i <= b; i++) set.add(i);
        }
        all.addAll(set);
        return all;
    }

    /** 0-3, 7, 9-11 */
    public static String format(List<Integer> layers) {
        return Binder.ranges(layers);
    }
}
