public class Hot {
    static int f(int x) { int s = 0; for (int i = 0; i < 1000; i++) s = (s * 31 + x + i) % 1000003; return s; }
    public static void main(String[] a) {
        int acc = 0;
        for (int i = 0; i < 20000; i++) acc = (acc + f(i)) % 1000003;
        Object o = null;
        try { o.hashCode(); } catch (NullPointerException e) { System.out.println("caught NPE"); }
        System.out.println("java result " + acc);
    }
}
