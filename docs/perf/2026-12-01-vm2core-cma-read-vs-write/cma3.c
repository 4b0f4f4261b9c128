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
/* 2-rank allgather step: own block memcpy + peer block by CMA write in pieces of P bytes
   (P = 0: one call). Also: the own copy after the CMA. */
struct sh { atomic_int bar[2]; pid_t pid[2]; char *in[2], *out[2]; };
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static void barrier(struct sh *s,int me,int *gen){(*gen)++;atomic_store(&s->bar[me],*gen);while(atomic_load(&s->bar[1-me])<*gen);}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  size_t B=atoi(argv[1])*1024; int iters=atoi(argv[2]);
  struct sh *s=mmap(0,sizeof *s,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  int me = fork()==0 ? 1 : 0;
  char *in=malloc(B), *out=malloc(2*B); memset(in,me+1,B); memset(out,0,2*B);
  s->pid[me]=getpid(); s->in[me]=in; s->out[me]=out; int gen=0;
  barrier(s,me,&gen);
  size_t pieces[]={0, 1<<20, 256<<10, 64<<10};
  double *t=malloc(iters*sizeof(double));
  for(int rd=0; rd<2; rd++) for(int pi=0;pi<4;pi++){ size_t P=pieces[pi]?pieces[pi]:B; if(P>B)P=B;
    for(int r=0;r<iters;r++){ barrier(s,me,&gen); double t0=now();
      if(!getenv("AFTER")) memcpy(out+me*B,in,B);
      for(size_t o=0;o<B;o+=P){ size_t n=B-o<P?B-o:P;
        if(rd){ struct iovec l={out+(1-me)*B+o,n}, rr={s->in[1-me]+o,n}; process_vm_readv(s->pid[1-me],&l,1,&rr,1,0);}
        else { struct iovec l={in+o,n}, rr={s->out[1-me]+me*B+o,n}; process_vm_writev(s->pid[1-me],&l,1,&rr,1,0);} }
      if(getenv("AFTER")) memcpy(out+me*B,in,B);
      barrier(s,me,&gen); t[r]=now()-t0; }
    qsort(t,iters,sizeof(double),cmp);
    if(me==0) printf("%6zuK %s piece %7zu median %.2f best %.2f\n",B/1024,rd?"readv ":"writev",pieces[pi],t[iters/2],t[0]);
  }
  if(me==0) wait(0); return 0; }
