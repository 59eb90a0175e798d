package k3j.io;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** Every one of the 65,536 half and bfloat16 bit patterns widens exactly. */
class WidenTest {

    @Test
    void everyHalfWidensExactly() {
        for (int h = 0; h < 0x10000; h++) {
            int got = Float.floatToRawIntBits(Widen.f16((short) h));
            boolean nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
            // NaN: sign, all-ones exponent, the 10 payload bits shifted up by 13 (quiet bit NOT forced)
            int want = nan ? ((h & 0x8000) << 16) | 0x7f80_0000 | ((h & 0x3ff) << 13)
                    : Float.floatToRawIntBits(Float.float16ToFloat((short) h));
            assertEquals(want, got, String.format("half %04x", h));
        }
    }

    @Test
    void everyBfloat16WidensExactly() {
        for (int h = 0; h < 0x10000; h++) {
            assertEquals(h << 16, Float.floatToRawIntBits(Widen.bf16((short) h)), String.format("bf16 %04x", h));
        }
    }

    @Test
    void aSignallingHalfNanKeepsItsPayload() {
        assertEquals(0x7fa0_2000, Float.floatToRawIntBits(Widen.f16((short) 0x7d01)));
    }
}
