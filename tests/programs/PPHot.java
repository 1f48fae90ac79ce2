// A JVM whose one hot method the JIT compiles: the perf-map tests name it from `jcmd
// Compiler.perfmap`. Runs for the seconds it is given (the test kills it sooner).
public class PPHot {
    static long ppHotSpin(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) s += (i * 31) ^ (s >>> 3);
        return s;
    }

    public static void main(String[] a) {
        long end = System.currentTimeMillis() + Long.parseLong(a[0]) * 1000;
        long t = 0;
        while (System.currentTimeMillis() < end) t += ppHotSpin(1_000_000);
        System.out.println(t);
    }
}
