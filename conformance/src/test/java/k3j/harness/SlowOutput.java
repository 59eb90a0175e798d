package k3j.harness;

import java.nio.file.Path;
import k3j.io.AtomicWrite;

/**
 * A child-process main that writes an output the way every k3 output is written ({@link AtomicWrite}) but
 * slowly: it prints "writing" once the first half is out, then keeps writing for a while, so a gate can SIGKILL
 * it in the middle of the write and look at what is left.
 *   usage: SlowOutput TARGET
 */
public final class SlowOutput {
    private SlowOutput() {}

    public static void main(String[] args) throws Exception {
        AtomicWrite.write(Path.of(args[0]), "slow output", out -> {
            byte[] block = new byte[64 << 10];
            for (int i = 0; i < 8; i++) out.write(block);
            out.flush();
            System.out.println("writing");
            System.out.flush();
            for (int i = 0; i < 600; i++) {
                out.write(block);
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        });
        System.out.println("done");
    }
}
