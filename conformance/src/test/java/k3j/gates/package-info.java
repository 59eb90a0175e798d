/**
 * The gates: one class per claim, named after it and tagged with its gate's name (the README's gate table),
 * each a list of cases over {@link k3j.harness}. No gate imports another.
 */
package k3j.gates;
