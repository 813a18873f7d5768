use furiosa_opt_std::prelude::*;

axes![
    H = 1024,
    C = 64,
    P = 1024,
    E = 32768,
    Q = 2048,
    W = 151936,
    Wp = 155648,
    N = 8,
    G = 2,
    D = 128,
    L = 3072,
    T = 512,
    Dummy4 = 4,
    Dummy64 = 64,
];
