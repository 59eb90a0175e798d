package k3j.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.Executable;
import java.lang.reflect.Field;
import java.lang.reflect.GenericArrayType;
import java.lang.reflect.Member;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.lang.reflect.TypeVariable;
import java.lang.reflect.WildcardType;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * k3j.api stands alone: every type a caller can see in it (a public or protected field, constructor, method, record
 * component, supertype, type parameter bound or declared exception of a type a caller can reach, generic arguments
 * included) is a k3j.api type, a java.* type, or one of the few types the API names as they are rather than mirror
 * ({@link #SHARED}: one name per concept). Every class compiled into the package is read, so a new type is covered
 * without being listed here.
 */
class ApiStandsAloneTest {
    /** The one type of a concept the API takes and gives as it is: a finding's category, a chat's thinking channel. */
    static final Set<String> SHARED = Set.of("k3j.verdict.Finding", "k3j.chat.Thinking");

    @Test
    void everyTypeInTheApisSignaturesIsItsOwnOrTheJdks() throws Exception {
        List<Class<?>> visible = visibleTypes();
        assertTrue(visible.size() >= 13 && visible.contains(Engine.class) && visible.contains(History.Message.class),
                "the package's class files were found: " + visible);
        assertEquals(new TreeSet<String>(), leaks(visible));
    }

    /** The API's enums mirror the engine's by name, constant for constant: a constant added to one side fails here, not at a caller's valueOf. */
    @Test
    void theApisEnumsNameEveryConstantOfTheEnginesOwn() {
        List<List<Class<? extends Enum<?>>>> pairs = List.of(List.of(Kernels.class, k3j.kernels.KernelPath.Mode.class), List.of(ExpertCodes.class, k3j.kernels.Mxfp4.Codes.class),
                List.of(TrunkCheck.class, k3j.trunk.DataBinding.Check.class),
                List.of(Decision.Outcome.class, k3j.verdict.Verdict.Outcome.class), List.of(History.Role.class, k3j.chat.Role.class));
        for (List<Class<? extends Enum<?>>> p : pairs) {
            assertEquals(names(p.get(1)), names(p.get(0)), p.get(0).getName() + " against " + p.get(1).getName());
        }
        assertTrue(Decision.Outcome.CONFORMS.green() && !Decision.Outcome.INCOMPLETE.green());
    }

    private static List<String> names(Class<? extends Enum<?>> e) {
        return Stream.of(e.getEnumConstants()).map(Enum::name).toList();
    }

    /** What the check must catch: internal types nested in generic signatures, a supertype's argument, a declared exception; not a private member. */
    @Test
    void internalTypesNestedInSignaturesAreFound() {
        assertEquals(new TreeSet<>(Set.of("ApiStandsAloneTest.Leaky(): k3j.kernels.KernelPath$Mode", "ApiStandsAloneTest.Leaky.plans(): k3j.plan.MemoryPlan",
                        "ApiStandsAloneTest.Leaky.plans(): k3j.io.CheckpointException", "ApiStandsAloneTest.Leaky.Sub implements: k3j.model.Forward$Result")),
                leaks(List.of(Leaky.class, Leaky.Sub.class)));
    }

    @SuppressWarnings("unused")
    public abstract static class Leaky implements Comparable<Leaky> {
        public Leaky(java.util.function.Consumer<? super k3j.kernels.KernelPath.Mode> m) {}

        public abstract java.util.Map<String, List<k3j.plan.MemoryPlan[]>> plans() throws k3j.io.CheckpointException;

        private k3j.model.Forward forward() {   // private: not part of the API
            return null;
        }

        public abstract static class Sub implements java.util.function.Supplier<k3j.model.Forward.Result> {}
    }

    /** The package's types a caller outside it can reach: public top-level ones, and their public or protected members' types, recursively. */
    private static List<Class<?>> visibleTypes() throws IOException, URISyntaxException, ClassNotFoundException {
        Path dir = Path.of(Engine.class.getProtectionDomain().getCodeSource().getLocation().toURI()).resolve("k3j/api");
        List<Class<?>> out = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.sorted().toList()) {
                String name = f.getFileName().toString();
                if (!name.endsWith(".class") || name.equals("package-info.class")) continue;
                Class<?> c = Class.forName("k3j.api." + name.substring(0, name.length() - ".class".length()), false, Engine.class.getClassLoader());
                if (reachable(c)) out.add(c);
            }
        }
        return out;
    }

    private static boolean reachable(Class<?> c) {
        if (c.isAnonymousClass() || c.isLocalClass() || c.isSynthetic()) return false;
        if (c.getEnclosingClass() == null) return Modifier.isPublic(c.getModifiers());
        return visible(c.getModifiers()) && reachable(c.getEnclosingClass());
    }

    private static boolean visible(int modifiers) {
        return Modifier.isPublic(modifiers) || Modifier.isProtected(modifiers);
    }

    static Set<String> leaks(List<Class<?>> types) {
        Set<String> out = new TreeSet<>();
        for (Class<?> c : types) {
            String owner = c.getName().substring(c.getPackageName().length() + 1).replace('$', '.');
            check(owner + " extends", c.getGenericSuperclass(), out);
            for (Type t : c.getGenericInterfaces()) check(owner + " implements", t, out);
            for (TypeVariable<?> v : c.getTypeParameters()) check(owner + "<" + v.getName() + ">", v, out);
            if (c.isRecord()) for (RecordComponent rc : c.getRecordComponents()) check(owner + "." + rc.getName(), rc.getGenericType(), out);
            for (Field f : c.getDeclaredFields()) if (visible(f.getModifiers()) && !f.isSynthetic()) check(owner + "." + f.getName(), f.getGenericType(), out);
            List<Executable> members = new ArrayList<>(List.of(c.getDeclaredConstructors()));
            members.addAll(List.of(c.getDeclaredMethods()));
            for (Executable m : members) {
                if (!visible(m.getModifiers()) || m.isSynthetic()) continue;
                String where = m instanceof java.lang.reflect.Constructor<?> ? owner + "()" : owner + "." + ((Member) m).getName() + "()";
                for (Type t : m.getGenericParameterTypes()) check(where, t, out);
                for (Type t : m.getGenericExceptionTypes()) check(where, t, out);
                for (TypeVariable<?> v : m.getTypeParameters()) check(where, v, out);
                if (m instanceof java.lang.reflect.Method method) check(where, method.getGenericReturnType(), out);
            }
        }
        return out;
    }

    private static void check(String where, Type t, Set<String> out) {
        walk(t, new HashSet<>(), n -> out.add(where + ": " + n));
    }

    private static void walk(Type t, Set<TypeVariable<?>> seen, java.util.function.Consumer<String> leak) {
        switch (t) {
            case null -> {}
            case Class<?> c when c.isArray() -> walk(c.getComponentType(), seen, leak);
            case Class<?> c -> {
                if (c.isPrimitive()) return;
                String n = c.getName();
                if (!n.startsWith("java.") && !c.getPackageName().equals("k3j.api") && !SHARED.contains(n)) leak.accept(n);
            }
            case ParameterizedType p -> {
                walk(p.getRawType(), seen, leak);
                walk(p.getOwnerType(), seen, leak);
                for (Type a : p.getActualTypeArguments()) walk(a, seen, leak);
            }
            case WildcardType w -> {
                for (Type b : w.getUpperBounds()) walk(b, seen, leak);
                for (Type b : w.getLowerBounds()) walk(b, seen, leak);
            }
            case GenericArrayType g -> walk(g.getGenericComponentType(), seen, leak);
            case TypeVariable<?> v -> {
                if (seen.add(v)) for (Type b : v.getBounds()) walk(b, seen, leak);
            }
            default -> leak.accept("an unknown kind of type " + t);
        }
    }
}
