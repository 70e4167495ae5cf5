;; SBCL compiling many functions at run time (ptjit-bench's sbcl row):
;; N functions, each compiled with COMPILE and called 1000 times.
(defun make-fn (k)
  (compile nil `(lambda (x) (mod (+ (* x ,k) ,(* 7 k)) 1000003))))
(let ((n (parse-integer (second sb-ext:*posix-argv*)))
      (acc 7))
  (dotimes (k n)
    (let ((f (make-fn (+ k 1))))
      (dotimes (i 1000) (setf acc (funcall f (+ acc i))))))
  (format t "sbcl compiled ~D functions, result ~D~%" n acc))
