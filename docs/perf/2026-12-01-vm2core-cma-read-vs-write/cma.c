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
struct sh { atomic_int bar[2]; pid_t pid[2]; char *in[2], *out[2]; };
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static void barrier(struct sh *s,int me,int *gen){(*gen)++;atomic_store(&s->bar[me],*gen);while(atomic_load(&s->bar[1-me])<*gen);}
int main(int argc,char**argv){
  size_t B=atoi(argv[1])*1024; int iters=atoi(argv[2]);
  struct sh *s=mmap(0,sizeof *s,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  int me = fork()==0 ? 1 : 0;
  char *in=malloc(B), *out=malloc(2*B); memset(in,me+1,B); memset(out,0,2*B);
  s->pid[me]=getpid(); s->in[me]=in; s->out[me]=out; int gen=0;
  barrier(s,me,&gen);
  for(int mode=0;mode<3;mode++){ double best=1e18, tot=0;
    for(int r=0;r<iters;r++){ barrier(s,me,&gen); double t0=now();
      memcpy(out+me*B,in,B);
      if(mode==0){ struct iovec l={out+(1-me)*B,B}, rr={s->in[1-me],B}; process_vm_readv(s->pid[1-me],&l,1,&rr,1,0);}
      else if(mode==1){ struct iovec l={in,B}, rr={s->out[1-me]+me*B,B}; process_vm_writev(s->pid[1-me],&l,1,&rr,1,0);}
      else { memcpy(out+(1-me)*B,in,B); }
      barrier(s,me,&gen); double t=now()-t0; tot+=t; if(t<best)best=t; }
    if(me==0) printf("%6zuK %s mean %.2f best %.2f\n",B/1024,mode==0?"readv ":mode==1?"writev":"memcpy",tot/iters,best);
  }
  if(me==0) wait(0); return 0; }
