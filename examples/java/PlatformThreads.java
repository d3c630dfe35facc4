// PlatformThreads: VirtualThreads.java on platform threads — one OS thread per task (`new Thread`,
// started, each sleeping 10 s, all joined) — so that one table shows the JVM's two kinds of
// thread side by side. The article has no such row. No knob for the 10 s either.
//
//     java -cp DIR PlatformThreads N

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

public class PlatformThreads {
    public static void main(String[] args) throws InterruptedException {
        int numTasks = tasks(args);
        List<Thread> threads = new ArrayList<>(numTasks);
        for (int i = 0; i < numTasks; i++) {
            Thread thread = new Thread(() -> {
                try {
                    Thread.sleep(Duration.ofSeconds(10));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
    }

    /** N, the first argument (a whole number, at least 1); else usage on stderr, exit 2. */
    static int tasks(String[] args) {
        try {
            int n = Integer.parseInt(args.length > 0 ? args[0] : "");
            if (n >= 1) {
                return n;
            }
        } catch (NumberFormatException e) {
            // usage below
        }
        System.err.println("usage: java PlatformThreads N (a whole number of tasks, at least 1)");
        System.exit(2);
        return 0;
    }
}
