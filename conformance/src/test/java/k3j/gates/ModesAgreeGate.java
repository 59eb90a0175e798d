package k3j.gates;

import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import k3j.compare.Conformance;
import k3j.compare.SelfDivergence;
import k3j.harness.CheckpointUnderTest;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.ReportPart;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;

/**
 * Claim: the candidate under test ({@code -Dk3.candidate=A}) and the same engine in another mode
 * ({@code -Dk3.against=B}: chunked prefill, a restored state, batched) do not part: no stage of any layer differs
 * by more than its rounding budget. When they part, the case names the first layer, stage and position, as
 * {@code k3 conform --candidate A --against B} does. Without {@code -Dk3.against} the gate holds no case (the
 * comparison is asked for, not implied).
 */
@Tag("checkpoint")
@Epic("checkpoint conformance")
class ModesAgreeGate {

    @TestFactory
    Stream<DynamicTest> theOtherModeDoesNotPart() {
        String against = Project.property("k3.against");
        if (against.isEmpty()) return Stream.empty();
        return Stream.of(DynamicTest.dynamicTest("A against B (-Dk3.against): where one engine parts from itself", () -> {
            Evidence.part(ReportPart.MODEL);
            if (Project.property("k3.candidate").isEmpty()) fail("-Dk3.against=B compares two candidate dumps: give -Dk3.candidate=A too");
            Path b = Path.of(against);
            b = b.isAbsolute() ? b : Project.root().resolve(b).normalize();
            if (!Files.exists(b)) fail("gate data missing: -Dk3.against=" + against + " does not exist (" + b + ")");
            Conformance a = CheckpointUnderTest.open();
            try (Conformance other = Conformance.candidate(b, a.dump().source(), List.of())) {
                SelfDivergence d = SelfDivergence.of(a, other);
                Evidence.parameter("A", a.engine());
                Evidence.parameter("B", other.engine());
                Evidence.parameter("reference", a.dump().source() + " — " + a.dump().producer());
                Evidence.text("where A and B part", d.text());
                if (d.parting() != null) fail("A AND B PART AT: " + d.parting().text());
            }
        }));
    }
}
