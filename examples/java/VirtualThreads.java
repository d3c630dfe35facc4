// VirtualThreads: N virtual threads that each sleep 10 s, all joined — the Java program of
// async-runtimes-benchmarks-2024 ("Take 2", hez2010) in the shape it was published
// (Thread.startVirtualThread, Thread.sleep(Duration.ofSeconds(10)), join), which put
// 46.9 / 108.4 / 197.0 / 1095.2 MB at 1 / 10,000 / 100,000 / 1,000,000 tasks on OpenJDK 23.
// Like the article's, it has no knob for the 10 s. Needs a JDK 21 or later.
//
//     java -cp DIR VirtualThreads N

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

public class VirtualThreads {
    public static void main(String[] args) throws InterruptedException {
        int numTasks = tasks(args);
        List<Thread> threads = new ArrayList<>(numTasks);
        for (int i = 0; i < numTasks; i++) {
            Thread thread = Thread.startVirtualThread(() -> {
                try {
                    Thread.sleep(Duration.ofSeconds(10));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
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
        System.err.println("usage: java VirtualThreads N (a whole number of tasks, at least 1)");
        System.exit(2);
        return 0;
    }
}
