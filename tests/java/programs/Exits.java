import java.util.concurrent.Callable;

/** Runs a scenario's body and ends the JVM with its exit code: the client's non-daemon threads
 * would otherwise keep a program that threw alive until the test's time-out. */
public final class Exits {
    /** Every program's send time-out: a JVM's first send (route, connection, a topic made on first use)
     * can take over the client's default 3 s on a loaded machine, for Apache's broker as for ours. */
    public static final int SEND_TIMEOUT_MS = 10_000;

    private Exits() {
    }

    /** body returns the exit code; an exception prints its trace and exits 2. */
    public static void run(Callable<Integer> body) {
        int code;
        try {
            code = body.call();
        } catch (Throwable e) {
            e.printStackTrace();
            code = 2;
        }
        System.out.flush();
        System.exit(code);
    }
}
