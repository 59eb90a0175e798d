package k3j.harness;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.qameta.allure.Allure;
import java.util.Locale;

/** What a gate leaves in the Allure report beside its verdict: parameters and attachments. */
public final class Evidence {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private Evidence() {}

    public static void parameter(String name, Object value) {
        Allure.parameter(name, value instanceof Double d ? format(d) : value);
    }

    /** A ratio to tolerance or budget, printed so that 1.0 is the line a case must stay under. */
    public static String format(double ratio) {
        return String.format(Locale.ROOT, "%.3g", ratio);
    }

    /** The case's group in the report (its first level); a case without one lands under the engine gates or the harness's own tests. */
    public static void part(ReportPart part) {
        Allure.label(ReportPart.LABEL, part.title);
    }

    /**
     * "L 5" and "L37": a layer's name padded with a figure space (as wide as a digit) to two digits, so the
     * report's name order is the layers' numeric order (L 2 before L10) and the numbers line up.
     */
    public static String layer(int layer) {
        return layer < 10 ? "L\u2007" + layer : "L" + layer;
    }

    /** The group of a case inside its part: "failing" ones come before "passing" ones in the report's name order. */
    public static String verdictGroup(boolean passes) {
        return passes ? "passing" : "failing";
    }

    public static void json(String name, Object value) {
        try {
            Allure.addAttachment(name, "application/json", JSON.writeValueAsString(value), ".json");
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialise attachment " + name, e);
        }
    }

    public static void text(String name, String value) {
        Allure.addAttachment(name, "text/plain", value, ".txt");
    }

    /**
     * The case's name in the report (allure-junit-platform would prefix a template invocation with its method),
     * with a historyId from the name: merged shards' cases ("layers 0-46", "layers 47-92") stay distinct.
     */
    public static void caseName(String name) {
        Allure.getLifecycle().updateTestCase(t -> {
            t.setName(name);
            t.setHistoryId(java.util.UUID.nameUUIDFromBytes((t.getFullName() + " " + name).getBytes(java.nio.charset.StandardCharsets.UTF_8)).toString());
        });
    }
}
