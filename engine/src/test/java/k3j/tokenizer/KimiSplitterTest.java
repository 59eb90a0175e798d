package k3j.tokenizer;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The hand-written scanner cuts random text exactly where the Kimi regex does. */
class KimiSplitterTest {
    /** Every kind of char the pattern distinguishes, several times over. */
    private static final int[] POOL = {
            'a', 'z', 'A', 'Z', 's', 'S', 't', 'T', 'r', 'e', 'E', 'v', 'V', 'l', 'L', 'm', 'M', 'd', 'D', 'k', 0x17F, '\'', '\'', '\'',
            ' ', ' ', ' ', '\t', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x2003, 0x2028, 0x3000, 0x1680,
            '0', '7', 0x0661, 0x00BD, 0x2167, 0x3007, '.', ',', '!', '/', '-', '_', '(', '"', '<', '|', '>', '[',
            0x4E2D, 0x6587, 0x3005, 0x2E80, 0x2F00, 0x20000, 0x30000,
            0x0301, 0x0300, 0x0903, 0x20DD, 0x01C5, 0x02B0, 0x3041, 0x30A2, 0xFF76, 0xAC00, 0x0628, 0x0915, 0x0E01, 0x0E31, 0x0416, 0x0436,
            0x1F600, 0x1F44D, 0x1F3FD, 0x200D, 0xFE0F, 0xDC80, 0xDCFF, 0x00DF, 0x0130, 0x0131, 0x212A};

    @Test
    void cutsRandomTextLikeTheRegex() {
        Pattern regex = SplitPattern.compile(SplitPattern.KIMI);
        SplittableRandom r = new SplittableRandom(20261201);
        for (int t = 0; t < 30000; t++) {
            StringBuilder sb = new StringBuilder();
            int len = 1 + r.nextInt(24);
            for (int i = 0; i < len; i++) sb.appendCodePoint(POOL[r.nextInt(POOL.length)]);
            String s = sb.toString();
            List<Integer> want = new ArrayList<>(), got = new ArrayList<>();
            Matcher m = regex.matcher(s);
            while (m.find()) want.add(m.end());
            KimiSplitter.split(s, (a, b) -> got.add(b));
            assertEquals(want, got, () -> "pieces differ for " + s.codePoints().mapToObj(c -> String.format("U+%04X", c)).toList());
        }
    }
}
