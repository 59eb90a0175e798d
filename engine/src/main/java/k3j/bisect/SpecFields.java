package k3j.bisect;

/** The fields of one spec against its form's names (L, EXPERT, MASK, ...), each refused by name when it does not parse. */
record SpecFields(String spec, String[] names, String[] values) {
    int integer(int i) {
        long v = whole(i);
        if (v > Integer.MAX_VALUE) throw bad(i, "at most " + Integer.MAX_VALUE);
        return (int) v;
    }

    long whole(int i) {
        try {
            long v = Long.parseLong(values[i]);
            if (v < 0) throw bad(i, "a whole number >= 0");
            return v;
        } catch (NumberFormatException e) {
            throw bad(i, "a whole number written in decimal");
        }
    }

    /** MASK: decimal (16) or hex (0x10), 1..255. */
    int mask(int i) {
        String v = values[i];
        try {
            return v.startsWith("0x") || v.startsWith("0X") ? Integer.parseInt(v.substring(2), 16) : Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw bad(i, "a byte mask 1..255, in decimal (16) or hex (0x10)");
        }
    }

    float decimal(int i) {
        try {
            float v = Float.parseFloat(values[i]);
            if (!Float.isFinite(v)) throw bad(i, "a finite number");
            return v;
        } catch (NumberFormatException e) {
            throw bad(i, "a number such as 0.5 or -2");
        }
    }

    BisectException bad(int i, String want) {
        return new BisectException("bad corruption '" + spec + "': " + names[i] + " is '" + values[i] + "'; it must be " + want
                + " (" + String.join(":", names) + ")");
    }
}
