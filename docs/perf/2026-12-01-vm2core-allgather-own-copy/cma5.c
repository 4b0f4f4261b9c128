#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>
#include <stdatomic.h>
/* Back-to-back 2-rank allgather calls (no barrier between them), each with only the
   synchronization its protocol needs, through flags in shared memory:
   push: wait until the peer entered call i (its output is free), write my block into it,
        raise done(i); copy my own block; wait for the peer's done(i).
   pull: raise ready(i) (my input is valid); copy my own block; wait for the peer's
        ready(i), read its block into my output, raise read(i); wait for the peer's
        read(i) (then my input may change).
   Time of `iters` calls after 20 warm-up calls, rank 0's clock, median of 5 runs. */
struct sh { atomic_long ent[2], done[2]; pid_t pid[2]; char *in[2], *out[2]; atomic_int bar[2]; };
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static void barrier(struct sh *s,int me,int *gen){(*gen)++;atomic_store(&s->bar[me],*gen);while(atomic_load(&s->bar[1-me])<*gen);}
static void waitge(atomic_long *p,long v){while(atomic_load_explicit(p,memory_order_acquire)<v);}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  size_t B=atoi(argv[1])*1024; int iters=atoi(argv[2]); int nocopy=argc>3&&atoi(argv[3]);
  struct sh *s=mmap(0,sizeof *s,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  int me = fork()==0 ? 1 : 0, p=1-me, gen=0;
  char *in=malloc(B), *out=malloc(2*B); memset(in,me+1,B); memset(out,0,2*B);
  s->pid[me]=getpid(); s->in[me]=in; s->out[me]=out;
  barrier(s,me,&gen);
  long call=0;
  for(int mode=0;mode<2;mode++){ double t[5];
    for(int run=0;run<5;run++){
      barrier(s,me,&gen); double t0=0;
      for(int i=-20;i<iters;i++){ if(i==0) t0=now(); call++;
        if(mode==0){ /* push */
          atomic_store_explicit(&s->ent[me],call,memory_order_release);
          waitge(&s->ent[p],call);
          struct iovec l={in,B}, r={s->out[p]+me*B,B}; process_vm_writev(s->pid[p],&l,1,&r,1,0);
          atomic_store_explicit(&s->done[me],call,memory_order_release);
          if(!nocopy) memcpy(out+me*B,in,B);
          waitge(&s->done[p],call);
        } else { /* pull */
          atomic_store_explicit(&s->ent[me],call,memory_order_release);
          if(!nocopy) memcpy(out+me*B,in,B);
          waitge(&s->ent[p],call);
          struct iovec l={out+p*B,B}, r={s->in[p],B}; process_vm_readv(s->pid[p],&l,1,&r,1,0);
          atomic_store_explicit(&s->done[me],call,memory_order_release);
          waitge(&s->done[p],call);
        } }
      t[run]=(now()-t0)/iters; }
    qsort(t,5,sizeof(double),cmp);
    if(me==0) printf("%6zuK %s%s per call median %.2f best %.2f\n",B/1024,mode?"pull":"push",nocopy?" nocopy":"",t[2],t[0]);
  }
  if(me==0) wait(0); return 0; }
