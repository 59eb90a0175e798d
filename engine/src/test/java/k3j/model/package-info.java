/** Unit tests of binding, expert drops and the tiny oracle end to end. */
package k3j.model;
