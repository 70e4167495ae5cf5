;; Guile 3 JIT-compiling hot procedures (ptjit-bench's guile row): N
;; procedures, each compiled to bytecode and called 3000 times, past the
;; JIT's threshold.
(use-modules (system base compile))
(define n (string->number (cadr (command-line))))
(define (run f i acc)
  (if (= i 3000) acc (run f (+ i 1) (f (+ acc i)))))
(let loop ((k 1) (acc 7))
  (if (> k n)
      (begin (display "guile compiled ") (display n)
             (display " procedures, result ") (display acc) (newline))
      (loop (+ k 1)
            (run (compile `(lambda (x) (modulo (+ (* x ,k) ,(* 7 k)) 1000003))
                          #:env (current-module))
                 0 acc))))
