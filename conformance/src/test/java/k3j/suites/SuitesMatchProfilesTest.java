package k3j.suites;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Arrays;
import java.util.Set;
import java.util.TreeSet;
import javax.xml.parsers.DocumentBuilderFactory;
import k3j.harness.Project;
import org.junit.jupiter.api.Test;
import org.junit.platform.suite.api.ExcludeTags;
import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * A suite run from an IDE selects exactly what its Maven profile selects: for every profile of the parent
 * pom that sets gates.groups or gates.excludedGroups there is a suite {@code k3j.suites.<Profile>Suite}
 * over the gates package whose @IncludeTags / @ExcludeTags are those groups.
 */
class SuitesMatchProfilesTest {
    @Test
    void everyGateProfileHasASuiteWithTheSameTags() throws Exception {
        var pom = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(Project.root().resolve("pom.xml").toFile());
        NodeList profiles = pom.getElementsByTagName("profile");
        int checked = 0;
        for (int i = 0; i < profiles.getLength(); i++) {
            Element p = (Element) profiles.item(i);
            String id = p.getElementsByTagName("id").item(0).getTextContent().trim();
            Set<String> groups = tags(p, "gates.groups"), excluded = tags(p, "gates.excludedGroups");
            if (groups.isEmpty() && excluded.isEmpty()) continue;
            String name = "k3j.suites." + Character.toUpperCase(id.charAt(0)) + id.substring(1) + "Suite";
            Class<?> suite;
            try {
                suite = Class.forName(name);
            } catch (ClassNotFoundException e) {
                fail("profile '" + id + "' selects gates by tag but has no suite " + name + " (see README: adding a profile)");
                return;
            }
            assertEquals(Set.of("k3j.gates"), Set.of(suite.getAnnotation(SelectPackages.class).value()), name);
            IncludeTags inc = suite.getAnnotation(IncludeTags.class);
            ExcludeTags exc = suite.getAnnotation(ExcludeTags.class);
            assertEquals(groups, inc == null ? Set.of() : new TreeSet<>(Arrays.asList(inc.value())), name + " @IncludeTags vs -P" + id);
            assertEquals(excluded, exc == null ? Set.of() : new TreeSet<>(Arrays.asList(exc.value())), name + " @ExcludeTags vs -P" + id);
            checked++;
        }
        assertTrue(checked >= 2, "the weightless and checkpoint profiles at least: found " + checked);
    }

    private static Set<String> tags(Element profile, String property) {
        NodeList n = profile.getElementsByTagName(property);
        Set<String> out = new TreeSet<>();
        if (n.getLength() == 0) return out;
        for (String t : n.item(0).getTextContent().split(",")) if (!t.isBlank()) out.add(t.trim());
        return out;
    }
}
