package k3j.gates;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaConstructorCall;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.lang.EvaluationResult;
import io.qameta.allure.Epic;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import k3j.harness.Evidence;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The structure that keeps one verdict (docs/semantics.md §10.11), as rules over the compiled engine: only the verdict
 * package constructs a verdict's value; a front door that judges takes its exit code from the verdict alone; no package
 * cycles; front doors → API → the rest, never back up; and below the API the decision under the evidence it judges
 * (verdict ← dump ← compare ← capture, provider), never the reverse; and the API throws only its own exceptions. Each rule is a function of the package root, so the
 * same rule runs over {@code k3j} (it must hold) and over the planted miniature {@code k3j.planted} (it must report every
 * planted violation and no legal planted class).
 */
@Tag("architecture")
@Epic("verdicts")
class ArchitectureGate {
    /** The packages a user enters by (the command, its servers and probes): they use the API and each other; nothing uses them. */
    static final List<String> FRONT_DOORS = List.of("cli", "serve", "probe");
    /** The package of the one decision (relative to the root): only its classes construct a verdict's value. */
    static final String VERDICT_PACKAGE = "verdict";
    /** The verdict's values (relative to the root), and the classes whose use makes a class a judge. */
    static final List<String> VERDICT_VALUES = List.of("verdict.Verdict", "verdict.PlanVerdict", "api.Decision"),
            VERDICT = List.of("verdict.Verdict", "verdict.PlanVerdict", "verdict.Invariants", "api.Decision");
    /** Below the API, bottom up: the decision, the dumps it never reads, the comparisons of them, what is built on those. */
    static final List<String> EVIDENCE_LAYERS = List.of("verdict", "dump", "compare", "capture", "provider");

    /** One rule, the planted classes it must report, and the planted classes it must not. */
    record Case(String name, Function<String, ArchRule> rule, List<String> violators, List<String> legal) {}

    static final List<Case> CASES = List.of(
            new Case("only the verdict constructs outcomes", ArchitectureGate::onlyTheVerdictConstructsOutcomes,
                    List.of("k3j.planted.fleet.OwnVerdict"), List.of("k3j.planted.verdict.Invariants", "k3j.planted.verdict.Peeks", "k3j.planted.cli.Command")),
            new Case("exit codes come only from the verdict", ArchitectureGate::exitCodesComeOnlyFromTheVerdict,
                    List.of("k3j.planted.cli.OwnExitCode"), List.of("k3j.planted.cli.Command")),
            new Case("no package cycles", ArchitectureGate::noPackageCycles,
                    List.of("k3j.planted.fleet.Loop", "k3j.planted.compare.LoopBack"), List.of()),
            new Case("front doors -> API -> the rest, never back up", ArchitectureGate::layering,
                    List.of("k3j.planted.compare.CallsUp", "k3j.planted.api.BackDoor"), List.of("k3j.planted.cli.Command", "k3j.planted.api.Door")),
            new Case("the decision below the evidence: verdict <- dump <- compare <- capture, provider", ArchitectureGate::evidenceLayers,
                    List.of("k3j.planted.verdict.Peeks", "k3j.planted.compare.Grades"),
                    List.of("k3j.planted.verdict.Invariants", "k3j.planted.compare.Compare", "k3j.planted.provider.Grade", "k3j.planted.dump.Dump")),
            new Case("the API throws only its own exceptions", ArchitectureGate::theApiThrowsOnlyItsOwnExceptions,
                    List.of("k3j.planted.api.ThrowsForeign"), List.of("k3j.planted.api.Door", "k3j.planted.api.BackDoor")));

    static JavaClasses engine, planted;

    @BeforeAll
    static void importClasses() {
        // the engine's main classes: not its test jar, not the gates' own classes (k3j.gates, k3j.harness, k3j.planted)
        ImportOption mainOnly = location -> !location.contains("/test-classes/") && !location.contains("-tests.jar");
        engine = new ClassFileImporter().withImportOption(mainOnly).importPackages("k3j");
        planted = new ClassFileImporter().importPackages("k3j.planted");
        assertTrue(engine.size() > 300 && engine.stream().noneMatch(c -> c.getPackageName().startsWith("k3j.planted") || c.getPackageName().startsWith("k3j.gates")), "the engine's classes were not found: " + engine.size());
        assertTrue(planted.size() >= 10, "the planted classes were not found: " + planted.size());
    }

    static List<String> names(String root, List<String> relative) {
        return relative.stream().map(r -> root + "." + r).toList();
    }

    static ArchRule onlyTheVerdictConstructsOutcomes(String root) {
        List<String> values = names(root, VERDICT_VALUES);
        String verdict = root + "." + VERDICT_PACKAGE;
        DescribedPredicate<JavaClass> inVerdict = DescribedPredicate.describe("in " + verdict + " (or a value rendering itself)",
                c -> c.getPackageName().equals(verdict) || c.getPackageName().startsWith(verdict + ".") || values.contains(c.getName()));
        return noClasses().that(DescribedPredicate.not(inVerdict))
                .should().callConstructorWhere(DescribedPredicate.describe("a constructor of a verdict's value " + values,
                        (JavaConstructorCall call) -> values.contains(call.getTargetOwner().getName())))
                .because("the decision is made in exactly one place (Invariants.decide); everything else renders it");
    }

    static ArchRule exitCodesComeOnlyFromTheVerdict(String root) {
        List<String> verdict = names(root, VERDICT);
        String exitCode = root + ".cli.ExitCode";
        DescribedPredicate<JavaClass> judging = DescribedPredicate.describe("judge (use the verdict)",
                c -> c.getDirectDependenciesFromSelf().stream().anyMatch(d -> verdict.contains(d.getTargetClass().getName())));
        DescribedPredicate<JavaClass> frontDoor = DescribedPredicate.describe("are in a front door " + FRONT_DOORS,
                c -> FRONT_DOORS.stream().anyMatch(f -> c.getPackageName().equals(root + "." + f) || c.getPackageName().startsWith(root + "." + f + ".")));
        return noClasses().that(frontDoor).and(judging)
                .should().accessField(exitCode, "OK").orShould().accessField(exitCode, "INCOMPLETE")
                .because("a command that judges exits by Verdict.exitCode() alone: 0 and 3 are the verdict's to give");
    }

    static ArchRule noPackageCycles(String root) {
        return slices().matching(root + ".(*)..").should().beFreeOfCycles();
    }

    static ArchRule layering(String root) {
        String[] doors = FRONT_DOORS.stream().map(f -> root + "." + f + "..").toArray(String[]::new);
        DescribedPredicate<JavaClass> rest = DescribedPredicate.describe("every other package of " + root, c -> c.getPackageName().startsWith(root + ".")
                && !c.getPackageName().startsWith(root + ".api") && FRONT_DOORS.stream().noneMatch(f -> (c.getPackageName() + ".").startsWith(root + "." + f + ".")));
        return layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer("front doors").definedBy(doors)
                .layer("API").definedBy(root + ".api..")
                .layer("the rest").definedBy(rest)
                .whereLayer("front doors").mayNotBeAccessedByAnyLayer()
                .whereLayer("API").mayOnlyBeAccessedByLayers("front doors");
    }

    static ArchRule theApiThrowsOnlyItsOwnExceptions(String root) {
        String api = root + ".api";
        return noClasses().that().resideInAPackage(api)
                .should().callConstructorWhere(DescribedPredicate.describe("a constructor of an exception outside " + api + " and java.*",
                        (JavaConstructorCall call) -> call.getTargetOwner().isAssignableTo(Throwable.class)
                                && !call.getTargetOwner().getPackageName().equals(api) && !call.getTargetOwner().getPackageName().startsWith("java.")))
                .because("a caller of the API catches the API's types (CannotJudge, Engine.OpenException, StateRefused), never a type of a package below it");
    }

    static ArchRule evidenceLayers(String root) {
        List<String> l = EVIDENCE_LAYERS;
        return layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer(l.get(0)).definedBy(root + "." + l.get(0) + "..")
                .layer(l.get(1)).definedBy(root + "." + l.get(1) + "..")
                .layer(l.get(2)).definedBy(root + "." + l.get(2) + "..")
                .layer(l.get(3)).definedBy(root + "." + l.get(3) + "..")
                .layer(l.get(4)).definedBy(root + "." + l.get(4) + "..")
                .whereLayer(l.get(1)).mayOnlyBeAccessedByLayers(l.get(2), l.get(3), l.get(4))
                .whereLayer(l.get(2)).mayOnlyBeAccessedByLayers(l.get(3), l.get(4))
                .whereLayer(l.get(3)).mayNotBeAccessedByAnyLayer()
                .whereLayer(l.get(4)).mayNotBeAccessedByAnyLayer();
    }

    @Test
    void everyRuleHoldsOnTheEngineAndReportsItsPlantedViolations() {
        List<String> failures = new ArrayList<>();
        for (Case c : CASES) {
            EvaluationResult onEngine = c.rule().apply("k3j").evaluate(engine);
            if (onEngine.hasViolation()) failures.add(c.name() + " is broken by the engine:\n  " + String.join("\n  ", onEngine.getFailureReport().getDetails()));
            EvaluationResult onPlanted = c.rule().apply("k3j.planted").evaluate(planted);
            String report = String.join("\n", onPlanted.getFailureReport().getDetails());
            for (String v : c.violators()) if (!report.contains("<" + v + ">") && !report.contains(v + ".")) failures.add(c.name() + " misses its planted violation " + v + ":\n" + report);
            for (String l : c.legal()) {
                for (String line : onPlanted.getFailureReport().getDetails()) {
                    if (line.startsWith("Class <" + l + ">") || line.startsWith("Method <" + l + ".") || line.startsWith("Constructor <" + l + ".")) {
                        failures.add(c.name() + " reports the legal planted class " + l + ": " + line);
                    }
                }
            }
            Evidence.text(c.name(), "engine: " + (onEngine.hasViolation() ? "VIOLATED" : "holds") + "\nplanted violations reported:\n" + report);
        }
        assertTrue(failures.isEmpty(), String.join("\n\n", failures));
        assertFalse(CASES.isEmpty());
    }
}
