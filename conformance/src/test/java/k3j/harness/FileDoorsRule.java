package k3j.harness;

import com.tngtech.archunit.core.domain.JavaAccess;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaCodeUnit;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;

/**
 * The rule {@link FileDoorsGate} checks: outside {@code k3j.io} no class opens a file for writing or reads one by
 * itself. Writing goes through {@code Outputs} and {@code AtomicWrite} (inputs refused by identity, links
 * and special files refused, written atomically), reading through {@code SafeFiles} (regular files only, sizes checked
 * before anything is allocated).
 */
public final class FileDoorsRule {
    /** The JDK calls that open or read a file's bytes, by owner: method names; "<init>" is a constructor. */
    public static final Map<String, Set<String>> FORBIDDEN = Map.of(
            "java.nio.file.Files", Set.of("newOutputStream", "write", "writeString", "newBufferedWriter", "newByteChannel", "copy", "move",
                    "newInputStream", "newBufferedReader", "readAllBytes", "readString", "readAllLines", "lines"),
            "java.nio.channels.FileChannel", Set.of("open"),
            "java.nio.channels.AsynchronousFileChannel", Set.of("open"),
            "java.io.FileOutputStream", Set.of("<init>"),
            "java.io.FileInputStream", Set.of("<init>"),
            "java.io.RandomAccessFile", Set.of("<init>"),
            "java.io.FileWriter", Set.of("<init>"),
            "java.io.FileReader", Set.of("<init>"));
    /** Print streams and writers opened on a file name or a File (not those wrapping a stream). */
    static final List<String> PRINTERS = List.of("java.io.PrintWriter", "java.io.PrintStream", "java.util.Formatter");
    static final String DOORS = "k3j.io";

    private FileDoorsRule() {}

    public static final ArchRule RULE = classes().that().resideOutsideOfPackage(DOORS + "..")
            .should(new ArchCondition<JavaClass>("open a file for writing or read one only through " + DOORS + " (Outputs, AtomicWrite, SafeFiles)") {
                @Override
                public void check(JavaClass c, ConditionEvents events) {
                    for (JavaAccess<?> a : c.getAccessesFromSelf()) {
                        String why = forbidden(a);
                        if (why != null) events.add(SimpleConditionEvent.violated(a, a.getOrigin().getFullName() + " " + why + " (" + a.getSourceCodeLocation() + ")"));
                    }
                }
            }).because("every file k3j writes goes out through one door and every untrusted file comes in through one (docs/files.md)");

    /** Why this access is a file opened outside the doors, or null. */
    static String forbidden(JavaAccess<?> a) {
        String owner = a.getTargetOwner().getName(), name = a.getName();
        Set<String> names = FORBIDDEN.get(owner);
        if (names != null && names.contains(name)) return "calls " + owner + "." + name;
        if (PRINTERS.contains(owner) && name.equals("<init>") && a.getTarget() instanceof com.tngtech.archunit.core.domain.AccessTarget.ConstructorCallTarget t) {
            var params = t.getRawParameterTypes();
            if (!params.isEmpty() && (params.getFirst().getName().equals("java.lang.String") || params.getFirst().getName().equals("java.io.File"))) {
                return "opens a " + owner + " on a file";
            }
        }
        return null;
    }

    /** The code unit an access comes from, for messages. */
    static String origin(JavaAccess<?> a) {
        JavaCodeUnit u = a.getOrigin();
        return u.getOwner().getSimpleName() + "." + u.getName();
    }
}
