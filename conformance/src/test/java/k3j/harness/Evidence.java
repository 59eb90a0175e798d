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
