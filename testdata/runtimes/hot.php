<?php
// PHP's tracing JIT: a loop hot enough to be traced (opcache.jit_hot_loop,
// 64 iterations by default) and a function called from it.
function step($x, $i) { return ($x * 31 + $i) % 1000003; }
$n = isset($argv[1]) ? (int)$argv[1] : 3000;
$acc = 7;
for ($i = 0; $i < $n; $i++) {
    $acc = step($acc, $i);
}
echo "php result $acc\n";
