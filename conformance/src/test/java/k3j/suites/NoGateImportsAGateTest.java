package k3j.suites;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.classfile.ClassFile;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.constantpool.PoolEntry;
import java.lang.classfile.constantpool.Utf8Entry;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Each gate stands alone over {@code k3j.harness}: no class of {@code k3j.gates} names another gate's class
 * (a nested record, a helper, a constant). Read from the compiled classes' constant pools, so a type used
 * only in a signature counts as much as an import; a gate run by name in a child JVM (a string) does not.
 */
class NoGateImportsAGateTest {
    private static final Pattern GATE_CLASS = Pattern.compile("k3j/gates/([A-Za-z0-9_$-]+)");

    @Test
    void noGateReferencesAnotherGate() throws IOException, URISyntaxException {
        Path gates = Path.of(NoGateImportsAGateTest.class.getClassLoader().getResource("k3j/gates").toURI());
        List<String> found = new ArrayList<>();
        Set<String> scanned = new TreeSet<>();
        try (Stream<Path> classes = Files.list(gates)) {
            for (Path c : classes.filter(p -> p.toString().endsWith(".class") && !p.getFileName().toString().equals("package-info.class")).sorted().toList()) {
                String self = topLevel(c.getFileName().toString().replace(".class", ""));
                scanned.add(self);
                for (String other : referencedGates(Files.readAllBytes(c))) {
                    if (!other.equals(self)) found.add(c.getFileName() + " -> k3j.gates." + other);
                }
            }
        }
        assertTrue(scanned.size() >= 20, "the gates' compiled classes were not found: " + scanned);
        assertEquals(List.of(), found, "a gate uses another gate's code; move what they share into k3j.harness");
    }

    /** The top-level classes of k3j.gates a class file names, as a class or inside a descriptor or signature. */
    static Set<String> referencedGates(byte[] classFile) {
        Set<String> out = new TreeSet<>();
        for (PoolEntry e : ClassFile.of().parse(classFile).constantPool()) {
            String s = e instanceof ClassEntry ce ? ce.asInternalName() : e instanceof Utf8Entry u ? u.stringValue() : null;
            if (s == null) continue;
            Matcher m = GATE_CLASS.matcher(s);
            while (m.find()) if (!m.group(1).equals("package-info")) out.add(topLevel(m.group(1)));
        }
        return out;
    }

    private static String topLevel(String name) {
        int d = name.indexOf('$');
        return d < 0 ? name : name.substring(0, d);
    }
}
