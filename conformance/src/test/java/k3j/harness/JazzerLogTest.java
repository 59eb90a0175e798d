package k3j.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The fuzz gate's quiet Jazzer log drops exactly Jazzer's info lines, written as Jazzer writes them. */
class JazzerLogTest {

    @Test
    void onlyInfoLinesAreDropped() {
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        PrintStream err = new PrintStream(JazzerLog.withoutInfoLines(console), true, StandardCharsets.UTF_8);
        err.print("INFO: ");                                   // Jazzer's Log: the prefix, then the message
        err.println("Loaded 1005 hooks from com.code_intelligence.jazzer.runtime.TraceCmpHooks");
        err.print("WARN: ");
        err.println("INFO: inside a warning is not an info line");
        err.println("== Java Exception: k3j INFO: a finding");
        err.print("INFO: ");
        err.println("Instrumented k3j.fuzz.Limits with custom hooks only (took 6 ms, size +0%)");
        err.println(" INFO: indented, not Jazzer's prefix");
        err.println("INFO:no space");
        assertEquals("""
                WARN: INFO: inside a warning is not an info line
                == Java Exception: k3j INFO: a finding
                 INFO: indented, not Jazzer's prefix
                INFO:no space
                """, console.toString(StandardCharsets.UTF_8));
    }
}
