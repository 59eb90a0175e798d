package k3j.harness;

import io.qameta.allure.listener.TestLifecycleListener;
import io.qameta.allure.model.Label;
import io.qameta.allure.model.TestResult;
import java.util.Locale;
import java.util.Set;

/**
 * Where each case sits in the report, applied to every result as it is written: the labels a reader does not use
 * (host, thread, framework, language, JUnit ids) are dropped; a case without a {@link ReportPart} is an engine gate
 * (k3j.gates) or one of the harness's own tests, which get their own group and a readable name
 * ({@code aPresetWithoutATrunkFails(Path)} becomes "a preset without a trunk fails").
 */
public final class ReportLayout implements TestLifecycleListener {
    static final Set<String> NOISE = Set.of("host", "thread", "framework", "language", "package", "testClass", "testMethod",
            "suite", "parentSuite", "subSuite", "junit.platform.uniqueid");

    @Override
    public void beforeTestWrite(TestResult t) {
        String testClass = label(t, "testClass");
        t.getLabels().removeIf(l -> NOISE.contains(l.getName()));
        String part = label(t, ReportPart.LABEL);
        if (part == null) {
            boolean gate = testClass != null && testClass.startsWith("k3j.gates.");
            part = (gate ? ReportPart.GATES : ReportPart.HARNESS).title;
            add(t, ReportPart.LABEL, part);
            if (!gate) {
                t.getLabels().removeIf(l -> l.getName().equals("epic") || l.getName().equals("feature") || l.getName().equals("story"));
                if (testClass != null) add(t, "feature", words(testClass.substring(testClass.lastIndexOf('.') + 1).replaceFirst("Test$", "")));
                t.setName(readable(t.getName()));
            }
        } else if (!part.equals(ReportPart.GATES.title)) {
            t.getLabels().removeIf(l -> l.getName().equals("epic")); // the part is the case's first group
        }
    }

    /** A JUnit method name as words: "aPresetWithoutATrunkFails(Path)" is "a preset without a trunk fails". */
    static String readable(String name) {
        if (name == null || name.contains(" ")) return name;
        return words(name.replaceFirst("\\(.*\\)$", ""));
    }

    static String words(String camel) {
        return camel.replaceAll("(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ").toLowerCase(Locale.ROOT).replace('_', ' ').trim();
    }

    private static String label(TestResult t, String name) {
        return t.getLabels().stream().filter(l -> name.equals(l.getName())).map(Label::getValue).findFirst().orElse(null);
    }

    private static void add(TestResult t, String name, String value) {
        t.getLabels().add(new Label().setName(name).setValue(value));
    }
}
