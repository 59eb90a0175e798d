/** Unit tests of the memory plan, its refusals and the sizes it is computed from. */
package k3j.plan;
