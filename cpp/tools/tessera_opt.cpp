// TEMPORARY stub, replaced by the real tessera-opt.
int main() { return 1; }
