/* weft-nccl-driver: placeholder replaced below. */
int main(void) { return 0; }
