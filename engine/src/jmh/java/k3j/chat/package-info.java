/** JMH benchmark of a chat follow-up turn. */
package k3j.chat;
