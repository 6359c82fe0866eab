import java.util.concurrent.Callable;

/** Runs a scenario's body and ends the JVM with its exit code: the client's non-daemon threads
 * would otherwise keep a program that threw alive until the test's time-out. */
public final class Exits {
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
