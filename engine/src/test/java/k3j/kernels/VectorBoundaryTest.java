package k3j.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.classfile.Attributes;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.FieldModel;
import java.lang.classfile.MethodModel;
import java.lang.constant.ClassDesc;
import java.lang.constant.ConstantDescs;
import java.lang.constant.MethodTypeDesc;
import java.lang.reflect.AccessFlag;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.VectorSpecies;
import org.junit.jupiter.api.Test;

/**
 * The rules that keep the Vector API kernels compiled (package-info, docs/fp-contract.md §4), read from the engine's
 * class files: no vector, mask or shuffle is a parameter, a return value or a field anywhere in the engine (C2 boxes a
 * vector that crosses a call it does not inline, and that call then runs the allocating Java fallback); every
 * {@code VectorSpecies} field is static final (a constant C2 can fold); no method is over the JVM's huge-method
 * limit of 8000 bytecode bytes (never compiled at all).
 */
class VectorBoundaryTest {

    static final int HUGE_METHOD = 8000;

    /** Value types of jdk.incubator.vector that are not vectors: passing them around costs nothing. */
    static final Set<String> NOT_VECTORS = Set.of("VectorSpecies", "VectorShape", "VectorOperators", "VectorOperators$Operator",
            "VectorOperators$Unary", "VectorOperators$Binary", "VectorOperators$Ternary", "VectorOperators$Associative",
            "VectorOperators$Test", "VectorOperators$Comparison", "VectorOperators$Conversion");

    static boolean vector(ClassDesc d) {
        while (d.isArray()) d = d.componentType();
        return d.isClassOrInterface() && d.packageName().equals("jdk.incubator.vector") && !NOT_VECTORS.contains(d.displayName());
    }

    /** Every rule one class breaks, each naming the class and member. */
    static List<String> violations(byte[] classBytes) {
        ClassModel cm = ClassFile.of().parse(classBytes);
        String owner = cm.thisClass().asInternalName().replace('/', '.');
        List<String> out = new ArrayList<>();
        for (MethodModel m : cm.methods()) {
            MethodTypeDesc t = m.methodTypeSymbol();
            String name = owner + "." + m.methodName().stringValue() + t.displayDescriptor();
            for (ClassDesc p : t.parameterList()) if (vector(p)) out.add(name + " takes a " + p.displayName());
            if (vector(t.returnType())) out.add(name + " returns a " + t.returnType().displayName());
            m.findAttribute(Attributes.code()).ifPresent(code -> {
                if (code.codeLength() > HUGE_METHOD) out.add(name + " has " + code.codeLength() + " bytecode bytes, over " + HUGE_METHOD);
            });
        }
        for (FieldModel f : cm.fields()) {
            ClassDesc type = f.fieldTypeSymbol();
            String name = owner + "." + f.fieldName().stringValue();
            if (vector(type)) out.add(name + " is a " + type.displayName() + " field");
            boolean constant = f.flags().has(AccessFlag.STATIC) && f.flags().has(AccessFlag.FINAL);
            if (type.displayName().equals("VectorSpecies") && !constant) out.add(name + " is a VectorSpecies field that is not static final");
        }
        return out;
    }

    static byte[] bytesOf(Class<?> c) {
        try (var in = c.getResourceAsStream("/" + c.getName().replace('.', '/') + ".class")) {
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Test
    void noEngineClassPassesVectorsAcrossCallsOrHasAHugeMethod() throws IOException, URISyntaxException {
        Path classes = Path.of(MatVec.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<Path> files;
        try (Stream<Path> s = Files.walk(classes)) {
            files = s.filter(p -> p.toString().endsWith(".class")).toList();
        }
        assertTrue(files.size() > 100, "expected the engine's classes under " + classes + ", found " + files.size());
        assertTrue(files.stream().anyMatch(p -> p.endsWith("MatVec.class")), "MatVec.class not under " + classes);
        List<String> all = new ArrayList<>();
        for (Path f : files) all.addAll(violations(Files.readAllBytes(f)));
        assertEquals(List.of(), all);
    }

    /** A class breaking each rule: the check must name every break (else the test above proves nothing). */
    static final class Escaping {
        static VectorSpecies<Double> species = DoubleVector.SPECIES_256;
        DoubleVector held;

        static DoubleVector twice(DoubleVector v) {
            return v.add(v);
        }
    }

    @Test
    void theCheckNamesEveryBrokenRule() {
        List<String> v = violations(bytesOf(Escaping.class));
        String owner = Escaping.class.getName();
        assertTrue(v.contains(owner + ".twice(DoubleVector)DoubleVector takes a DoubleVector"), v::toString);
        assertTrue(v.contains(owner + ".twice(DoubleVector)DoubleVector returns a DoubleVector"), v::toString);
        assertTrue(v.contains(owner + ".held is a DoubleVector field"), v::toString);
        assertTrue(v.contains(owner + ".species is a VectorSpecies field that is not static final"), v::toString);
        assertEquals(4, v.size(), v::toString);
        // a method one byte over the huge-method limit, built as a class file
        byte[] huge = ClassFile.of().build(ClassDesc.of("k3j.kernels.Huge"), cb -> cb.withMethodBody("big",
                MethodTypeDesc.of(ConstantDescs.CD_void), ClassFile.ACC_STATIC, code -> {
                    for (int i = 0; i < HUGE_METHOD; i++) code.nop();
                    code.return_();
                }));
        assertEquals(List.of("k3j.kernels.Huge.big()void has 8001 bytecode bytes, over 8000"), violations(huge));
    }
}
