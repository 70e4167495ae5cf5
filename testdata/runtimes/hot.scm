;; Guile 3: a procedure called often enough for its JIT
;; (GUILE_JIT_THRESHOLD, 1000 by default).
(define (step x i) (modulo (+ (* x 31) i) 1000003))
(define (loop i n acc)
  (if (= i n) acc (loop (+ i 1) n (step acc i))))
(define n (let ((args (cdr (command-line))))
            (if (null? args) 3000 (string->number (car args)))))
(display "guile result ")
(display (loop 0 n 7))
(newline)
