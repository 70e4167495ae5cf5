%% Erlang/OTP (BeamAsm): every module loaded is compiled to machine code.
-module(hot).
-export([main/1]).

step(X, I) -> (X * 31 + I) rem 1000003.

loop(N, N, Acc) -> Acc;
loop(I, N, Acc) -> loop(I + 1, N, step(Acc, I)).

main(Args) ->
    N = case Args of [A | _] -> list_to_integer(A); [] -> 3000 end,
    io:format("erlang result ~B~n", [loop(0, N, 7)]).
