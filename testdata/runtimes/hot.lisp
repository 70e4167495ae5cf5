;; SBCL compiles every toplevel form to native code in its dynamic space.
(defun step1 (x i) (mod (+ (* x 31) i) 1000003))
(defun hot (n)
  (let ((acc 7))
    (dotimes (i n acc) (setf acc (step1 acc i)))))
(let ((n (if (cdr sb-ext:*posix-argv*) (parse-integer (second sb-ext:*posix-argv*)) 3000)))
  (format t "sbcl result ~D~%" (hot n)))
